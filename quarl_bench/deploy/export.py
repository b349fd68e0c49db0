"""The deployable policy: a raw env observation in, the env action out, as one torch module (then ONNX).

Everything SB3's ``predict`` does around the network is inside (a Dict observation comes in flat, its keys
concatenated in the order :mod:`quarl_bench.observation_layout` declares and ``policy.json`` records): VecNormalize's observation statistics (clipping
included), Atari's uint8 channel-last frames transposed and scaled, and deterministic action selection (argmax;
the Gaussian mean clipped to the action bounds; tanh-squashed actions unscaled to the bounds). SB3's export
guide leaves unscaling to the user; :func:`check_equivalence` proves the artifact picks SB3's actions.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.preprocessing import is_image_space
from stable_baselines3.common.vec_env import VecEnv, VecNormalize
from torch import nn

from quarl_bench.errors import QuarlError
from quarl_bench.families import family_of
from quarl_bench.observation_layout import layout_of

if TYPE_CHECKING:
    from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy

OPSET = 17


class TorchForm(nn.Module):
    """What every deployable form answers, so backends never ask which form they hold: ``torch_layers`` (a torch
    module to trace, quantize or write as C; an ONNX graph played as itself has none), ``carries_state`` (a recurrent
    policy's state in and out), :meth:`example` (export inputs) and :meth:`onnx` (its ONNX bytes). This base is a
    torch module's: input ``obs``, output ``action``, batch dimension dynamic."""

    torch_layers = True
    carries_state = False
    state_inputs: tuple[str, ...] = ()
    state_outputs: tuple[str, ...] = ()

    def example(self, sample: np.ndarray) -> tuple[torch.Tensor, ...]:
        """Export inputs: the observation batch."""
        return (torch.as_tensor(sample),)

    def written_chain(self) -> tuple[list[nn.Module], str, int]:
        """What a C artifact writes layer by layer: the modules, the head and the quantiles per action."""
        raise NotImplementedError

    def onnx(self, sample: np.ndarray) -> bytes:
        """ONNX bytes of the module (a recurrent form's also ``h``, ``c`` in and ``h_out``, ``c_out`` out:
        :mod:`quarl_bench.deploy.recurrent`)."""
        inputs, outputs = ["obs", *self.state_inputs], ["action", *self.state_outputs]
        axes = {"obs": {0: "batch"}, "action": {0: "batch"}}
        axes |= {name: {1: "batch"} for name in (*self.state_inputs, *self.state_outputs)}
        return traced_onnx(self, self.example(sample), inputs, outputs, axes)


def traced_onnx(
    module: nn.Module, example: tuple[torch.Tensor, ...], inputs: list[str], outputs: list[str], axes: dict
) -> bytes:
    """ONNX bytes of ``module`` traced on ``example`` (TorchScript export at :data:`OPSET`), attention's fused fast
    path off while tracing (its kernel has no ONNX export)."""
    module.eval()
    buffer = io.BytesIO()
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad():
            torch.onnx.export(
                module,
                example,
                buffer,  # type: ignore[arg-type]  # TorchScript export writes to a file object too (dynamo=False)
                input_names=inputs,
                output_names=outputs,
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)
    return buffer.getvalue()


class DeployablePolicy(TorchForm):
    """``forward(raw_obs) -> action`` for a policy of any family (:mod:`quarl_bench.families`): SB3 actor-critic,
    DQN, QR-DQN, DDPG/TD3/SAC/TQC, ARS, or a user's torch module; :meth:`raw_states` gives the gate's states as
    its artifact takes them."""

    obs_mean: torch.Tensor  # buffers: VecNormalize's statistics (with ``normalize``), the action bounds (Box)
    obs_scale: torch.Tensor
    low: torch.Tensor
    high: torch.Tensor
    clip_obs: float

    def __init__(
        self, policy: BasePolicy, observation_space: spaces.Space, normalizer: VecNormalize | None = None
    ) -> None:
        super().__init__()
        self.layout = layout_of(observation_space)  # a Dict observation's keys, concatenated in its declared order
        if self.layout is None and not isinstance(observation_space, spaces.Box):
            raise QuarlError(
                f"cannot export a policy for {type(observation_space).__name__} observations: "
                "expected a Box observation space or a Dict of vector Boxes"
            )
        self.policy, self.family = policy, family_of(policy)
        self.image = (
            self.layout is None
            and is_image_space(observation_space, check_channels=False)
            and observation_space.dtype == np.uint8
            and not self.family.raw_observations  # a user's module takes the observations as they come
        )
        shape = observation_space.shape or ()
        self.channels_last = self.image and shape[-1] < shape[0]
        self.obs_dim = self.layout.size if self.layout else int(np.prod(shape))
        action_space = policy.action_space
        self.discrete = isinstance(action_space, spaces.Discrete)
        if not self.discrete and not isinstance(action_space, spaces.Box):
            raise QuarlError(f"cannot export {type(action_space).__name__} actions: expected Discrete or Box")
        self.normalize = False
        if normalizer is not None and normalizer.norm_obs:
            self.normalize = True
            if self.layout is not None:  # per key, concatenated as the keys are
                mean, scale = self.layout.flat_statistics(normalizer)
            else:
                stats = normalizer.obs_rms
                assert not isinstance(stats, dict)  # a Box observation space has one RunningMeanStd
                mean, scale = stats.mean, 1.0 / np.sqrt(stats.var + normalizer.epsilon)
            self.register_buffer("obs_mean", torch.as_tensor(mean, dtype=torch.float32))
            self.register_buffer("obs_scale", torch.as_tensor(scale, dtype=torch.float32))
            self.clip_obs = float(normalizer.clip_obs)
        if isinstance(action_space, spaces.Box):
            self.register_buffer("low", torch.as_tensor(action_space.low, dtype=torch.float32))
            self.register_buffer("high", torch.as_tensor(action_space.high, dtype=torch.float32))

    def __deepcopy__(self, memo: dict) -> DeployablePolicy:
        """A copy to quantize: the SB3 policy rebuilt by ``clone_policy`` (deepcopy fails on gSDE's non-leaf
        tensors), buffers cloned."""
        from quarl_bench.quant.quantize import clone_policy

        twin = copy.copy(self)
        twin._parameters = dict(self._parameters)
        twin._buffers = {name: None if buffer is None else buffer.clone() for name, buffer in self._buffers.items()}
        twin._modules = {**self._modules, "policy": clone_policy(self.policy)}
        return twin

    def preprocess(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.float()
        if self.image:
            if self.channels_last:
                x = x.permute(0, 3, 1, 2)
            x = x / 255.0
        if self.normalize:
            x = torch.clamp((x - self.obs_mean) * self.obs_scale, -self.clip_obs, self.clip_obs)
        return x

    def network_input(self, x: torch.Tensor) -> torch.Tensor | dict[str, torch.Tensor]:
        """What the policy's features extractor takes: the flat vector split back into its keys (a Dict policy's
        ``CombinedExtractor`` flattens and concatenates them again, in the same order), else the vector itself."""
        return x if self.layout is None else self.layout.unflatten(x)

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """Logits / Q-values (discrete) or the action in the policy's own range (continuous)."""
        return self.family.scores(self.policy, self.network_input(x))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.action_of(self.scores(self.preprocess(obs)))

    def raw_states(self, states: np.ndarray) -> np.ndarray:
        """Network states (what the fixed-state set holds: observations after normalisation) as the artifact takes
        them: raw observations, before VecNormalize's statistics (uint8 images as they come)."""
        return raw_observations(self, states, np.uint8 if self.image else np.float32)

    def written_chain(self) -> tuple[list[nn.Module], str, int]:
        """The acting path's modules (batch norms folded), the head (``argmax``, ``clip``, ``unscale``) and the
        quantiles averaged per action."""
        from quarl_bench.deploy.mlp import acting_modules

        return acting_modules(self)

    def action_of(self, out: torch.Tensor) -> torch.Tensor:
        """The action from the scores: what ``predict`` does after the network."""
        if self.discrete:
            return torch.argmax(out, dim=1)
        if not self.family.squashed(self.policy):
            return torch.maximum(torch.minimum(out, self.high), self.low)  # SB3's predict clips the Gaussian mean
        return self.low + 0.5 * (out + 1.0) * (self.high - self.low)  # unscale a [-1, 1] action to the bounds


STATE_INPUTS, STATE_OUTPUTS = ("h", "c"), ("h_out", "c_out")  # a recurrent artifact's state names


class RecurrentDeployablePolicy(DeployablePolicy):
    """``forward(raw_obs, h, c) -> (action, h_out, c_out)``: one step of sb3-contrib's recurrent actor, state
    ``(layers, batch, hidden)``, with what ``predict`` does around it (normalisation, argmax or clipping)."""

    carries_state = True
    state_inputs, state_outputs = STATE_INPUTS, STATE_OUTPUTS
    policy: RecurrentActorCriticPolicy

    def forward(  # type: ignore[override]  # one step takes and gives the state: its artifact's inputs and outputs
        self, obs: torch.Tensor, h: torch.Tensor, c: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        policy = self.policy
        features = policy.pi_features_extractor(self.network_input(self.preprocess(obs)))
        latent, (h_out, c_out) = policy.lstm_actor(features.unsqueeze(0), (h, c))
        out = policy.action_net(policy.mlp_extractor.forward_actor(latent.squeeze(0)))
        return self.action_of(out), h_out, c_out

    @property
    def state_shape(self) -> tuple[int, int]:
        lstm = self.policy.lstm_actor
        return lstm.num_layers, lstm.hidden_size

    def example(self, sample: np.ndarray) -> tuple[torch.Tensor, ...]:
        """Export inputs: the observation batch and a zero state for it."""
        layers, hidden = self.state_shape
        zeros = torch.zeros(layers, len(sample), hidden)
        return torch.as_tensor(sample), zeros, zeros.clone()

    def raw_states(self, states: np.ndarray) -> np.ndarray:
        """Markov states ``[obs | h | c]`` as the artifact takes them: the observation part raw."""
        return raw_markov(self, states)


def raw_observations(module, network_states: np.ndarray, dtype) -> np.ndarray:
    """Raw observations that normalise to ``network_states`` (the same states, before VecNormalize's statistics)."""
    states = np.asarray(network_states, dtype=np.float32)
    if getattr(module, "normalize", False):
        states = states / module.obs_scale.numpy() + module.obs_mean.numpy()
    if getattr(module, "image", False):
        return np.asarray(network_states).astype(dtype)
    return states.astype(np.float32)


def raw_markov(module, network_states: np.ndarray) -> np.ndarray:
    """Markov states as a recurrent artifact takes them: the observation part before VecNormalize's statistics."""
    obs_dim = module.obs_dim
    states = np.asarray(network_states, dtype=np.float32)
    raw = raw_observations(module, states[:, :obs_dim], np.float32)
    return np.concatenate([raw.reshape(len(states), -1), states[:, obs_dim:]], axis=1)


def split_normalizer(env: VecEnv) -> tuple[VecEnv, VecNormalize | None]:
    """The env that yields raw observations, and the VecNormalize (outermost, as rl-zoo3 builds it) if any."""
    if isinstance(env, VecNormalize):
        return env.venv, env
    return env, None


def to_onnx(module: DeployablePolicy | GraphPolicy, sample: np.ndarray) -> bytes:
    """ONNX bytes of a deployable form (:meth:`DeployablePolicy.onnx`; an ONNX policy's own graph)."""
    return module.onnx(sample)


def check_equivalence(actions: np.ndarray, expected: np.ndarray, discrete: bool, tolerance: float = 1e-4) -> float:
    """Fraction of states on which the artifact's action equals SB3's (discrete) or is within ``tolerance``."""
    n = len(expected)
    if discrete:
        return float(np.mean(actions.reshape(n, -1) == expected.reshape(n, -1)))
    return float(np.mean(np.all(np.abs(actions.reshape(n, -1) - expected.reshape(n, -1)) <= tolerance, axis=1)))


class GraphPolicy:
    """An ONNX policy's deployable form: its own graph (current weights), input renamed ``obs``, and an ``action``
    output appended (ArgMax of the logits, or the actions clipped to the bounds). There is no torch module: its
    ``torch-fp32`` reference is that fp32 graph on ONNX Runtime."""

    image = False
    normalize = False
    torch_layers = False  # played as its own graph: nothing to trace, quantize on torch layers or write as C
    carries_state = False

    def __init__(self, policy, observation_space: spaces.Space, normalizer: VecNormalize | None = None) -> None:
        if normalizer is not None and normalizer.norm_obs:
            raise QuarlError("an ONNX policy gets no --vecnormalize: expected the normalisation inside the graph")
        self.policy = policy
        self.discrete = isinstance(policy.action_space, spaces.Discrete)
        if not self.discrete:  # the bounds its actions are clipped to (the parity gate's action range)
            self.low = torch.as_tensor(np.asarray(policy.action_space.low, np.float32))
            self.high = torch.as_tensor(np.asarray(policy.action_space.high, np.float32))
        self.graph = acting_graph(
            policy.current_graph(), policy.input_name, policy.action_space, policy.outputs_actions
        )

    def eval(self) -> GraphPolicy:
        return self

    def onnx(self, sample: np.ndarray) -> bytes:
        return self.graph

    def raw_states(self, states: np.ndarray) -> np.ndarray:
        return np.asarray(states, np.float32)  # no normaliser of its own (refused above)


def acting_graph(
    graph_bytes: bytes, input_name: str, action_space: spaces.Space, outputs_actions: bool = False
) -> bytes:
    """The graph with input ``obs`` and one output ``action``: argmax of the first output (discrete), the first
    output as int64 indices where it already is the action (a graph exported before), or the first output clipped
    to the action bounds (continuous)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load_from_string(graph_bytes)
    graph = model.graph
    for node in graph.node:
        node.input[:] = ["obs" if name == input_name else name for name in node.input]
    for value in graph.input:
        if value.name == input_name:
            value.name = "obs"
    scores = graph.output[0].name
    if scores == "action":  # a graph exported before: its output is renamed so the new head can take the name
        scores = "action_scores"
        for node in graph.node:
            node.output[:] = [scores if name == "action" else name for name in node.output]
            node.input[:] = [scores if name == "action" else name for name in node.input]
    if isinstance(action_space, spaces.Discrete) and outputs_actions:
        graph.initializer.append(numpy_helper.from_array(np.asarray([-1], np.int64), "action_shape"))
        graph.node.append(helper.make_node("Cast", [scores], ["action_index"], to=TensorProto.INT64))
        graph.node.append(helper.make_node("Reshape", ["action_index", "action_shape"], ["action"]))
        output = helper.make_tensor_value_info("action", TensorProto.INT64, ["batch"])
    elif isinstance(action_space, spaces.Discrete):
        graph.node.append(helper.make_node("ArgMax", [scores], ["action"], axis=1, keepdims=0))
        output = helper.make_tensor_value_info("action", TensorProto.INT64, ["batch"])
    else:
        assert isinstance(action_space, spaces.Box)  # an ONNX policy's actions are Discrete or Box (zoo/foreign.py)
        for name, bound in (("action_low", action_space.low), ("action_high", action_space.high)):
            graph.initializer.append(numpy_helper.from_array(np.asarray(bound, np.float32), name))
        graph.node.append(helper.make_node("Min", [scores, "action_high"], ["action_below_high"]))
        graph.node.append(helper.make_node("Max", ["action_below_high", "action_low"], ["action"]))
        output = helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", *action_space.shape])
    del graph.output[:]
    graph.output.append(output)
    return model.SerializeToString()


Form = DeployablePolicy | GraphPolicy | TorchForm


def chunk_form(policy: BasePolicy, observation_space: spaces.Space, normalizer: VecNormalize | None = None) -> Form:
    """A chunk policy's form: its module, the loop beside it (:mod:`quarl_bench.deploy.chunk_artifact`)."""
    from quarl_bench.deploy.chunk_artifact import ChunkForm

    return ChunkForm(policy, observation_space, normalizer)


FORMS: dict[str, Callable[[BasePolicy, spaces.Space, VecNormalize | None], Form]] = {
    "module": DeployablePolicy,
    "recurrent": RecurrentDeployablePolicy,
    "graph": GraphPolicy,
    "chunked": chunk_form,
}


def deployable(policy: BasePolicy, observation_space: spaces.Space, normalizer: VecNormalize | None = None) -> Form:
    """What a backend builds its artifact from: the deployable form the policy's adapter names
    (:attr:`~quarl_bench.zoo.policy.Policy.deploy_form`: a :class:`DeployablePolicy`, its recurrent form, a chunk
    policy's module with its loop beside it, or an ONNX policy's own :class:`GraphPolicy`)."""
    from quarl_bench.zoo.policy import as_policy

    form = as_policy(policy).deploy_form
    if form not in FORMS:
        raise QuarlError(
            f"cannot export a {form} policy: expected a policy that maps one observation to one action, a recurrent "
            "one or a chunk policy"
        )
    return FORMS[form](policy, observation_space, normalizer).eval()
