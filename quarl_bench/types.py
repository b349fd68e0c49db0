"""Frozen value types that flow down the pipeline: QuantSpec, AgentRef, Job, EvalResult."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from quarl_bench.action_modes import ActionMode
from quarl_bench.errors import QuarlError
from quarl_bench.precision import Precision, help_text, parse_precision, precision, precision_bits
from quarl_bench.registry import reference_rule
from quarl_bench.rounding import NEAREST, ROUNDINGS

GRANULARITIES = ("per-tensor", "per-channel", "auto")
ROLLOUT_REFERENCE = "none"  # a quantized-rollout run's reference: fp32 rollouts, the naive (uncorrected) loss
CALIBRATION_METHODS = ("minmax", "entropy", "percentile")  # ort-int8-static's (deploy)
# PTQ beyond round-to-nearest weights (quant/activations.py, quant/calibrated.py, quant/prune.py).
ACT_CALIBRATION_METHODS = ("minmax", "percentile", "mse", "dynamic")  # dynamic: each call's own range
GROUP_SIZES = (16, 32, 64, 128, 256)
PRUNE_STRUCTURES = ("unstructured", "neurons")
# Calibration states come from the fp32 agent playing envs seeded from here on: never an evaluation seed's episodes.
CALIBRATION_SEED = 1_000_000
DEFAULT_CALIBRATION_STATES = 1000
CALIBRATION_SAMPLING = "uniform over whole episodes"  # how the states are drawn (evaluation/calibration.py)
LAYER_MODES = ("paper", "quarl-code")
# Bump when quantize() changes any number it produces: rows made by an older quantizer are then not reused.
QUANTIZER_VERSION = 3  # 3: 2**bits-code group grids, MX exponents by frexp
# How an evaluation's random draws (sampled actions, observation noise) are made: per env, so a job's episodes do not
# depend on how its envs are split; rows stored before drew from shared generators, and their keys lack this field.
EVAL_DRAWS = "per-env"
# How an evaluation's episodes start: each from a reset seed of its own (evaluation/episode_seeds.py), so fp32 and
# quantized episodes pair one to one. Part of every key: rows stored before carry no episode identity.
EPISODE_SEEDS = "reset seed per episode"


@dataclass(frozen=True)
class QuantSpec:
    """What to do to a policy's acting network.

    :param precision: ``fp32``, ``fp16``, ``bf16`` or ``int2`` ... ``int31`` (see :func:`parse_precision`).
    :param granularity: ``auto`` (per-tensor for Linear, per-output-channel for Conv, as QuaRL did),
        ``per-tensor`` or ``per-channel`` for every layer.
    :param symmetric: symmetric narrow-range grid (2^bits - 1 levels around zero) instead of the paper's grid.
    :param quantize_bias: also quantize biases (QuaRL left them in fp32, so the default is False).
    :param layers: which tensors are quantized: ``paper`` (the acting network's weights, as the paper describes) or
        ``quarl-code`` (what harvard-edge/QuaRL's ``new_ptq.py`` really selected, see ``quant/layers.py``).
    :param calibration_states: calibrated PTQ only (activations, calibrated rounding): the visited states used.
    :param calibration_method: activation ranges' calibration: ``minmax``, ``percentile`` or ``mse``; or
        ``dynamic``: each input's own range per call and batch row, as ONNX Runtime's dynamic quantization takes it.
    :param layer_precisions: one precision per acting layer (module order) instead of one for all: per-layer
        sensitivity and mixed-precision allocations. ``precision`` is then the narrowest of them.
    :param act_bits: PTQ: each acting layer's input fake-quantized at this precision (an integer width or a format),
        ranges calibrated on ``calibration_states`` visited states with ``calibration_method``; '' = fp32.
    :param obs_bits: the observation after normalisation (the first acting layer's input), per feature; ``fp32``
        beside ``act_bits`` keeps it unquantized.
    :param out_bits: the output layer's output (logits, Q-values, actions before squashing).
    :param state_bits: a recurrent policy's hidden and cell state, rounded after every step (ranges calibrated on
        the states the fp32 policy visits).
    :param norm_bits: every LayerNorm and GroupNorm module's output, one range per tensor; '' = fp32.
    :param softmax_bits: every ``nn.Softmax`` module's output (attention probabilities), one range per tensor.
    :param group_size: integer weights on one grid per ``group_size`` input values of each output channel.
    :param ptq: how weights round: ``rtn`` (nearest), ``gptq`` or ``learned-round`` (calibrated on visited states).
    :param prune: share of acting weights zeroed by magnitude before quantization (0: none).
    :param prune_structure: ``unstructured`` (single weights) or ``neurons`` (whole output rows, by L2 norm).

    Fields that cannot change the result are normalised, so one computation has one key: granularity, symmetric
    and bias for float precisions, and the layer mode for fp32 (nothing is quantized).

    What produced a row (the method) and which artifact was deployed (the backend) are the job's
    (:class:`Job`, :class:`DeployTarget`), not the spec's.
    """

    precision: str = "fp32"
    granularity: str = "auto"
    symmetric: bool = False
    quantize_bias: bool = False
    layers: str = "paper"
    calibration_states: int = 0
    calibration_method: str = ""
    layer_precisions: tuple[str, ...] = ()
    act_bits: str = ""
    obs_bits: str = ""
    out_bits: str = ""
    state_bits: str = ""
    norm_bits: str = ""
    softmax_bits: str = ""
    group_size: int = 0
    ptq: str = "rtn"
    prune: float = 0.0
    prune_structure: str = "unstructured"

    def __post_init__(self) -> None:
        self._normalise_layer_precisions()
        self._normalise_recipe()
        if not self.calibrated:
            object.__setattr__(self, "calibration_states", 0)
            object.__setattr__(self, "calibration_method", "")
        if self.granularity not in GRANULARITIES:
            raise QuarlError(f"bad granularity {self.granularity!r}: expected one of {', '.join(GRANULARITIES)}")
        if self.layers not in LAYER_MODES:
            raise QuarlError(f"bad layers {self.layers!r}: expected one of {', '.join(LAYER_MODES)}")
        if not self.number_format.is_int:
            object.__setattr__(self, "group_size", 0)
            object.__setattr__(self, "granularity", "auto")
            object.__setattr__(self, "symmetric", False)
            object.__setattr__(self, "quantize_bias", False)
        if self.layers == "quarl-code":
            object.__setattr__(self, "quantize_bias", False)  # the QuaRL code's own rule decides about biases
        if self.is_identity:
            object.__setattr__(self, "layers", "paper")

    def _normalise_layer_precisions(self) -> None:
        """Per-layer precisions: normalised; one precision for every layer is the uniform spec."""
        if not self.layer_precisions:
            object.__setattr__(self, "layer_precisions", ())  # JSON gives a list
            return
        if self.layers != "paper":
            raise QuarlError("per-layer precisions apply to the acting layers only: expected layers 'paper'")
        per_layer = tuple(parse_precision(p) for p in self.layer_precisions)
        object.__setattr__(self, "layer_precisions", per_layer)
        narrowest = min(per_layer, key=lambda p: (precision_bits(p), p))
        object.__setattr__(self, "precision", narrowest)
        if len(set(per_layer)) == 1:
            object.__setattr__(self, "layer_precisions", ())

    def _normalise_recipe(self) -> None:
        """Validate and normalise the PTQ recipe fields (activations, groups, rounding, pruning, calibration)."""
        object.__setattr__(self, "precision", parse_precision(self.precision))
        for name in INPUT_FIELDS:
            value = getattr(self, name)
            if value == "":
                continue
            try:
                value = parse_precision(value)
            except QuarlError:
                raise QuarlError(f"bad {name.replace('_', ' ')} '{value}': expected {help_text()}") from None
            kept = name == "obs_bits" and bool(self.act_bits)  # fp32 observation, quantized activations
            object.__setattr__(self, name, "" if value == "fp32" and not kept else value)
        if self.group_size and self.group_size not in GROUP_SIZES:
            raise QuarlError(f"bad group size {self.group_size}: expected one of {', '.join(map(str, GROUP_SIZES))}")
        ROUNDINGS.get(self.ptq)  # refuses an unknown name, naming the registered ones
        if not 0 <= self.prune < 1:
            raise QuarlError(f"bad prune share {self.prune}: expected a share of the weights in (0, 1)")
        if self.prune_structure not in PRUNE_STRUCTURES:
            raise QuarlError(
                f"bad prune structure {self.prune_structure!r}: expected one of {', '.join(PRUNE_STRUCTURES)}"
            )
        if not self.prune:
            object.__setattr__(self, "prune_structure", "unstructured")
        if self.precision == "fp32":
            object.__setattr__(self, "ptq", "rtn")  # nothing is rounded
        elif self.ptq != "rtn" and not self.number_format.is_int:
            raise QuarlError(
                f"bad ptq method {self.ptq!r} for {self.precision}: a rounding algorithm needs an integer width"
            )
        if self.calibrated:
            if self.calibration_states == 0:  # not given: the command line's default
                object.__setattr__(self, "calibration_states", DEFAULT_CALIBRATION_STATES)
            if self.activations and not self.calibration_method:
                object.__setattr__(self, "calibration_method", "minmax")
            if self.calibration_states < 1:
                raise QuarlError(f"bad calibration states {self.calibration_states}: expected an integer >= 1")
            if not self.activations:
                object.__setattr__(self, "calibration_method", "")
            elif self.calibration_method not in ACT_CALIBRATION_METHODS:
                raise QuarlError(
                    f"bad calibration method {self.calibration_method!r}: expected one of "
                    f"{', '.join(ACT_CALIBRATION_METHODS)}"
                )
            elif self.calibration_method == "dynamic":  # nothing is calibrated: one key whatever the count
                object.__setattr__(self, "calibration_states", 1)

    def identity(self) -> dict[str, Any]:
        """The spec as job keys and stored rows record it: its fields, less those added later while they are at
        their defaults (so the keys of rows stored before them stay)."""
        fields = asdict(self)
        if not self.layer_precisions:
            del fields["layer_precisions"]
        defaults = QuantSpec()
        for name in RECIPE_FIELDS:
            if getattr(self, name) == getattr(defaults, name):
                del fields[name]
        return fields

    @property
    def activations(self) -> bool:
        """Whether any activation, observation, output or recurrent state is quantized."""
        return any(getattr(self, name) for name in INPUT_FIELDS)

    def weights_only(self) -> QuantSpec:
        """The same weight grid with activations, observations and outputs left in fp32."""
        if not self.activations:
            return self
        cleared: dict[str, Any] = dict.fromkeys(INPUT_FIELDS, "")  # each input's precision: '' for fp32
        return replace(self, **cleared, calibration_states=0, calibration_method="")

    @property
    def calibrated(self) -> bool:
        """Whether PTQ needs visited states: activation ranges or a rounding that reads layer inputs (not RTN, nor
        a data-free rounding)."""
        return self.activations or ROUNDINGS.get(self.ptq).calibrated

    def recipe_label(self) -> str:
        """The PTQ recipe beyond weight precision and grid options, short (``a8 g32 gptq prune0.5``); '' if none."""
        parts = [
            f"{short}{getattr(self, name).removeprefix('int')}" for name, short in RECIPE_SHORT if getattr(self, name)
        ]
        parts += [f"g{self.group_size}"] if self.group_size else []
        parts += [self.ptq] if self.ptq != "rtn" else []
        if self.prune:
            parts.append(f"prune{self.prune:g}" + ("-neurons" if self.prune_structure == "neurons" else ""))
        if self.calibrated and self.activations:
            count = "" if self.calibration_method == "dynamic" else self.calibration_states  # dynamic: none
            parts.append(f"cal-{self.calibration_method}{count}")
        elif self.calibrated:
            parts.append(f"cal{self.calibration_states}")
        return " ".join(parts)

    @property
    def number_format(self) -> Precision:
        """The precision as a registry value (:mod:`quarl_bench.precision`): ask it, not its name."""
        return precision(self.precision)

    @property
    def bits(self) -> int:
        return precision_bits(self.precision)

    def for_layer(self, index: int) -> QuantSpec:
        """The uniform spec that layer ``index`` is quantized with."""
        if not self.layer_precisions:
            return self
        return replace(self, precision=self.layer_precisions[index], layer_precisions=())

    @property
    def is_identity(self) -> bool:
        return self.precision == "fp32" and not self.activations and not self.prune


_INPUTS_SHORT = {"act_bits": "a", "obs_bits": "obs", "out_bits": "out", "state_bits": "h", "norm_bits": "norm"}
RECIPE_SHORT = (*_INPUTS_SHORT.items(), ("softmax_bits", "sm"))
INPUT_FIELDS = tuple(name for name, _ in RECIPE_SHORT)  # what activation calibration quantizes
RECIPE_FIELDS = (*INPUT_FIELDS, "group_size", "ptq", "prune", "prune_structure")


@dataclass(frozen=True)
class AgentRef:
    """A resolved, loadable agent on disk in the rl-zoo3 layout.

    :param source: where it came from: ``folder``, ``cache``, ``hub`` or ``trained``.
    :param run_dir: the ``{algo}/{env_id}_N`` folder holding ``{env_id}.zip`` and ``{env_id}/``.
    :param saved_env_id: the env id the agent was saved under (may be a legacy id such as ``LunarLander-v2``).
    :param content_hash: sha256 over the zip and its saved hyperparameters/normalisation files.
    :param model_path: a policy file given by the user (``--model`` zip or ONNX file, or ``--policy-module``'s
        ``FILE.py:FUNCTION``); empty for an agent in the zoo layout (``{run_dir}/{saved_name}.zip``).
    :param vecnormalize: a ``--vecnormalize`` file that normalises the observations.
    :param env_kwargs: ``--env-kwargs`` as JSON (empty: none given).
    :param env_packages: modules imported before the env is made (``--env-package``, ``module:EnvId``).
    """

    algo: str
    env_id: str
    saved_env_id: str
    source: str
    run_dir: str
    content_hash: str
    model_path: str = ""
    vecnormalize: str = ""
    env_kwargs: str = ""
    env_packages: tuple[str, ...] = ()

    @property
    def saved_name(self) -> str:
        """The saved id as rl-zoo3 names files and folders (``dmc/cartpole-balance-v0`` -> ``dmc-cartpole-...``)."""
        return file_name(self.saved_env_id)


def file_name(env_id: str) -> str:
    """rl-zoo3's file name for an env id (its ``EnvironmentName``): slashes become dashes."""
    return env_id.replace("/", "-")


@dataclass(frozen=True)
class DeployTarget:
    """The artifact a ``deploy`` job builds: a registered backend, the precision its artifact runs at, and the
    calibration of a backend that calibrates (``ort-int8-static``). Build one from a backend's name with
    :func:`quarl_bench.deploy.targets.deploy_target`, which reads the backend's registered facts.

    :param precision: the backend's precision (``fp32``, ``fp16``, ``int8``): the spec of its jobs.
    :param calibration_states: visited observations its activation ranges come from; 0 for a backend that does
        not calibrate.
    :param calibration_method: ``minmax``, ``entropy`` or ``percentile``; "" with no calibration states.
    :param artifact: the sha256 of the artifact's bytes a job plays (an export's certificate is measured on the
        bytes it names, :func:`quarl_bench.methods.deploy.built_artifact` refuses other ones); '' = whatever the
        backend builds (a ``deploy`` benchmark).
    """

    backend: str
    precision: str
    calibration_states: int = 0
    calibration_method: str = ""
    artifact: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "precision", parse_precision(self.precision))
        if not self.calibration_states and not self.calibration_method:
            return
        if self.calibration_states < 1:
            raise QuarlError(f"bad calibration states {self.calibration_states}: expected an integer >= 1")
        if self.calibration_method not in CALIBRATION_METHODS:
            raise QuarlError(
                f"bad calibration method {self.calibration_method!r}: expected one of {', '.join(CALIBRATION_METHODS)}"
            )

    @property
    def spec(self) -> QuantSpec:
        """What the artifact's numbers are: the backend's precision, nothing else set."""
        return QuantSpec(self.precision)


FP32_TARGET = DeployTarget("torch-fp32", "fp32")  # the fp32 reference every deployed artifact is compared with


DEFAULT_METHOD = "ptq"  # the method of a job that names none (quantize and play): a value, never branched on


def spec_identity(spec: QuantSpec, method: str = DEFAULT_METHOD, target: DeployTarget | None = None) -> dict[str, Any]:
    """A spec as job keys, verdict keys and stored rows record it: its identity, with the method that evaluates it
    and the deployed backend (and that backend's calibration), as when both were the spec's fields (pinned keys)."""
    fields = spec.identity() | {"method": method, "backend": target.backend if target else ""}
    if target is not None:
        fields |= {"calibration_states": target.calibration_states, "calibration_method": target.calibration_method}
        if target.artifact:  # an artifact's identity is its bytes (keys of rows stored before it stay)
            fields["artifact"] = target.artifact
    return fields


@dataclass(frozen=True)
class Job:
    """One evaluation: an agent's policy, quantized per ``spec`` or deployed as ``target``'s artifact, over a fixed
    set of seeded episodes.

    :param method: the registered method whose evaluator plays it, and that its stored row names; the job knows
        none of them by name (a method's module states what differs for its jobs: :data:`~quarl_bench.registry.REFERENCE_RULES`).
    :param target: the deployed artifact it plays, where its method builds one (its backend sets the spec).
    """

    algo: str
    env_id: str
    spec: QuantSpec
    agent_hash: str
    episodes: int = 100
    seed: int = 0
    n_envs: int = 10
    actions: ActionMode = field(default_factory=ActionMode)
    setting: str = ""  # what produced the policy when no stored agent did (an ActorQ setting's key)
    obs_noise: float = 0.0  # std of Gaussian noise added to every observation the policy sees (robustness)
    method: str = DEFAULT_METHOD
    target: DeployTarget | None = None
    perturbation: str = ""  # the condition it plays under (evaluation/perturbations.py), canonical; '' = nominal
    judge: str = ""  # a user's function deciding each episode's outcome (evaluation/judges.py): success=FILE.py:FN

    def __post_init__(self) -> None:
        # which methods take a target or a recipe is each method's to say, checked where a method is named
        if self.target is not None:
            object.__setattr__(self, "spec", self.target.spec)
        if self.episodes < 1:
            raise QuarlError(f"bad episode count {self.episodes}: expected an integer >= 1")
        if self.n_envs < 1:
            raise QuarlError(f"bad env count {self.n_envs}: expected an integer >= 1")
        if not self.obs_noise >= 0:
            raise QuarlError(f"bad observation noise {self.obs_noise}: expected a standard deviation >= 0")

    def identity(self) -> dict[str, Any]:
        """The fields that decide whether two jobs are the same run (the quantizer's version included)."""
        fields = asdict(self) | {"quantizer_version": QUANTIZER_VERSION}
        del fields["method"], fields["target"]  # recorded in the spec's identity, where they always were
        later = ("setting", "obs_noise", "perturbation", "judge")  # keys of rows stored before them stay while unused
        fields = {k: v for k, v in fields.items() if k not in later or getattr(self, k)}
        fields["spec"] = spec_identity(self.spec, self.method, self.target)
        if self.target is not None and self.target.calibration_states:  # rows before it: calibrated per job seed
            fields["deploy_calibration"] = "the claim's states"
        rounding = ROUNDINGS.get(self.spec.ptq)
        if self.spec.calibrated:
            fields["calibration"] = {"seed": CALIBRATION_SEED, "sampling": CALIBRATION_SAMPLING}
            if self.spec.ptq != NEAREST:
                fields["calibration"]["rounding"] = rounding.settings
        elif self.spec.ptq != NEAREST:  # a data-free rounding: its settings without calibration
            fields["rounding"] = rounding.settings
        if self.obs_noise or not self.deterministic:
            fields["draws"] = EVAL_DRAWS
        fields["episode_starts"] = EPISODE_SEEDS
        # 2: Box actions delayed or repeated as chosen (1 replayed the first action)
        return fields | ({"perturbation_version": 2} if self.perturbation else {})

    @property
    def key(self) -> str:
        """Stable hash of the job's identity: the store's primary key."""
        payload = json.dumps(self.identity(), sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:24]

    def reference(self) -> Job:
        """The fp32 job of the same agent on the same episodes: the baseline of this job's E%, as the job's method
        states it (:data:`~quarl_bench.registry.REFERENCE_RULES`; by default the same job at fp32)."""
        fp32 = replace(self, spec=QuantSpec("fp32"), target=None)
        return reference_rule(self.method)(fp32)

    @property
    def deterministic(self) -> bool:
        return self.actions.deterministic


@dataclass(frozen=True)
class LayerStats:
    """How quantization changed one weight tensor."""

    name: str
    shape: tuple[int, ...]
    weight_min: float
    weight_max: float
    step: float  # mean step over channels for per-channel; 0 for float casts and identity
    mse: float
    kl_div: float


@dataclass(frozen=True)
class EvalResult:
    """The outcome of one job, with enough provenance to trust and reproduce it."""

    job: Job
    episode_rewards: tuple[float, ...]
    episode_lengths: tuple[int, ...]
    wall_seconds: float
    layers: tuple[LayerStats, ...] = ()
    action_agreement: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    weights: dict[str, Any] = field(default_factory=dict)  # fp32 acting-weight profile, see ptq.weight_profile
    # per episode (as episode_rewards): (env index, episode number in that env, reset seed); see episode_seeds
    episode_ids: tuple[tuple[int, int, int], ...] = ()
    episode_outcomes: dict[str, tuple[float, ...]] = field(default_factory=dict)  # see evaluation/outcomes

    @property
    def mean_reward(self) -> float:
        return float(sum(self.episode_rewards) / len(self.episode_rewards))

    @property
    def std_reward(self) -> float:
        mean = self.mean_reward
        return float((sum((r - mean) ** 2 for r in self.episode_rewards) / len(self.episode_rewards)) ** 0.5)
