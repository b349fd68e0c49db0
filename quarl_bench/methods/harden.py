"""Hardening (handler of method ``harden``): fine-tune an agent with a recipe (``training/harden/recipes.py``) for a
target spec, write the hardened agent where every command takes it, and store one ``hardened`` row linking it to
its parent: recipe, budget, cost, and the parent's and the hardened agent's decision margins and weight spread.

An SB3 agent becomes ``OUT.zip`` with ``OUT/`` beside it, as rl-zoo3 lays out a run (the parent's ``config.yml``,
``env_kwargs.yml`` and ``vecnormalize.pkl``, so it is evaluated exactly as its parent, and ``harden.json``, its
provenance). A ``--policy-module`` policy becomes ``OUT.onnx`` (its module's output, logits or actions) with the
same ``OUT/harden.json``, and also a torch module, ``OUT/module.py:make`` (the parent's function with the hardened
``OUT/weights.pt``), so the backends that need torch (``c-int8``, ``c-int4``, LiteRT, ExecuTorch) take it. An
ONNX policy that is one MLP chain is distilled through its torch twin and becomes ``OUT.onnx`` alone (read back as
torch in turn).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from quarl_bench.errors import QuarlError
from quarl_bench.methods.protocol import THIS_MACHINE, OfAgent, SideRow, register
from quarl_bench.training.harden.recipes import Recipe
from quarl_bench.types import AgentRef, QuantSpec, spec_identity
from quarl_bench.zoo.forms import StoredForm, form_of

if TYPE_CHECKING:
    from quarl_bench.jobs.work import Work

HARDEN_VERSION = 1  # bump when a recipe's procedure changes what its settings mean
HARDEN_SEED = 3_000_000  # rollout seeds start here: apart from evaluation, calibration and fixed-state seeds
PROVENANCE_FILE = "harden.json"


@dataclass(frozen=True)
class HardenConfig(OfAgent):
    """One hardening run of the agent ``ref``.

    :param spec: the target spec the student computes at (narrower than fp32).
    :param recipe: the recipe and its settings.
    :param budget: env steps: the RL loss's training steps, or the states distillation collects.
    :param seed: the fine-tuning seed (its rollout envs are seeded apart from every evaluation's: ``HARDEN_SEED + seed``).
    :param out: where the hardened agent goes (``.zip`` for SB3 agents, ``.onnx`` for torch modules); not part of
        the key: the same run written elsewhere is the same run.
    """

    spec: QuantSpec
    recipe: Recipe
    budget: int
    seed: int = 0
    out: str = field(default="", compare=False)

    method: ClassVar[str] = "harden"

    def __post_init__(self) -> None:
        if self.spec.is_identity:
            raise QuarlError(
                "bad target spec fp32: expected a spec narrower than fp32, e.g. --bits 4 --granularity per-channel"
            )
        if self.spec.ptq != "rtn" or self.spec.prune:
            raise QuarlError(
                "bad target spec: the student computes with round-to-nearest weights, unpruned "
                "(expected --ptq rtn and no --prune; certify a hardened agent with GPTQ afterwards if you like)"
            )
        if self.budget < 1:
            raise QuarlError(f"bad --budget {self.budget}: expected env steps >= 1 (at most the zoo's training steps)")
        self.form.refuse_fine_tuning(self.ref, self.recipe.name, self.recipe.distills)

    @property
    def key(self) -> str:
        identity = {
            "parent": self.ref.content_hash,
            "env": self.ref.env_id,
            "spec": spec_identity(self.spec),
            "recipe": self.recipe.identity(),
            "budget": self.budget,
            "seed": self.seed,
            "version": HARDEN_VERSION,
        }
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]

    @property
    def form(self) -> StoredForm:
        """How the parent is stored: no SB3 model (a torch module or ONNX graph) has no RL loss, and is written as
        ONNX."""
        return form_of(self.ref)

    @property
    def suffix(self) -> str:
        return self.form.suffix


@dataclass(frozen=True)
class HardenJob:
    key: str


def default_out(config: HardenConfig, cache: Path) -> Path:
    """Where a study keeps a hardened agent: the cache, one folder per hardening key."""
    name = config.form.file_stem(config.ref)
    return cache / "hardened" / config.key / f"{name}{config.suffix}"


def provenance_path(out: Path) -> Path:
    """The hardened agent's provenance file: ``OUT/harden.json`` beside ``OUT.zip`` (or ``OUT.onnx``)."""
    return out.with_suffix("") / PROVENANCE_FILE


def parent_of(model_path: str | Path) -> AgentRef | None:
    """The parent agent a hardened agent's provenance names, or None for an agent that was not hardened.

    :raises QuarlError: when the parent named there is no longer where it was.
    """
    path = provenance_path(Path(model_path))
    if not path.is_file():
        return None
    parent = json.loads(path.read_text())["parent"]
    ref = AgentRef(**{**parent, "env_packages": tuple(parent.get("env_packages", ()))})
    where = Path(ref.model_path.rpartition(":")[0] or ref.model_path) if ref.model_path else Path(ref.run_dir)
    if not where.exists():
        raise QuarlError(f"the parent agent of {model_path} is no longer at {where}: expected its files there")
    return ref


def diagnostics(policy: Any, states: Any) -> dict[str, Any]:
    """Decision margins on the parent's fixed fp32-visited states (discrete actions) and the acting weights' spread."""
    from quarl_bench.evaluation.margins import decision_values, margin_summary, top2_gap
    from quarl_bench.quant.quantize import weight_profile

    spread = {k: v for k, v in weight_profile(policy).items() if k != "histogram"}
    values = decision_values(policy, states) if len(states) else None
    return {"margins": margin_summary(top2_gap(values)) if values is not None else {}, "weights": spread}


@register(HardenConfig)
class HardenHandler:
    """One job per config (its key, the hardening key); ``produce`` fine-tunes, writes the agent and its provenance
    atomically, and yields the ``hardened`` row."""

    ray = THIS_MACHINE  # the hardened agent goes to this machine's cache
    table = "hardened"

    def agent(self, work: Work) -> AgentRef:
        return work.config.ref

    def jobs(self, work: Work, agent: AgentRef | None) -> list[HardenJob]:
        return [HardenJob(work.config.key)]

    def produce(self, work: Work, agent: AgentRef | None, jobs: list[HardenJob]) -> Iterator[SideRow]:
        import torch

        from quarl_bench.evaluation.fixed_states import fixed_states
        from quarl_bench.zoo.forms import load_agent

        config: HardenConfig = work.config
        out = Path(config.out) if config.out else default_out(config, work.cache)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # small policies: one thread is ~3x faster than two here
        try:
            parent = load_agent(config.ref)
            states = fixed_states(config.ref.content_hash, parent.model.policy, parent.make_env)
            before = diagnostics(parent.model.policy, states)
            with tempfile.TemporaryDirectory(prefix=".harden-", dir=_made(out.parent)) as scratch:
                staged = Path(scratch) / out.name
                cost = _fine_tune(config, parent, staged)
                hardened = _load_staged(config, staged)
                after = diagnostics(hardened.model.policy, states)
                record = _provenance(config, cost, before, after, work.driver)
                staged.with_suffix("").mkdir(exist_ok=True)
                provenance_path(staged).write_text(json.dumps(record, indent=2, default=str))
                _place(staged, out)
        finally:
            torch.set_num_threads(threads)
        yield SideRow("hardened", hardened_row(config, out, record, work.driver))


def _made(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _fine_tune(config: HardenConfig, parent: Any, staged: Path) -> Any:
    from quarl_bench.training.harden.distill import distill
    from quarl_bench.training.harden.distill_recurrent import distill_recurrent
    from quarl_bench.training.harden.rl_loss import rl_fine_tune
    from quarl_bench.zoo.policy import as_policy

    if as_policy(parent.model.policy).carries_state:  # its states are sequences: truncated BPTT
        distill = distill_recurrent
    seed = HARDEN_SEED + config.seed
    if not config.recipe.distills:
        cost = rl_fine_tune(parent, config.spec, config.recipe, config.budget, config.seed, staged)
    else:
        cost = distill(parent, config.spec, config.recipe, config.budget, seed)
        config.form.save_fine_tuned(parent, config.ref, staged)
    config.form.keep_beside(parent, staged)
    if config.ref.vecnormalize:  # a --model zip normalised by a --vecnormalize file: it goes beside the agent
        folder = staged.with_suffix("")
        folder.mkdir(exist_ok=True)
        shutil.copyfile(config.ref.vecnormalize, folder / "vecnormalize.pkl")
    return cost


def hardened_agent(parent: AgentRef, path: str | Path) -> AgentRef:
    """The hardened agent at ``path`` (its zip or ONNX file), resolved as ``--model`` resolves it on the parent's
    env, env keyword arguments and env packages."""
    from quarl_bench.zoo.model_file import model_ref

    return model_ref(
        path,
        parent.env_id,
        form_of(parent).model_algo(parent),
        env_kwargs=json.loads(parent.env_kwargs or "{}") or None,
        env_packages=parent.env_packages,
    )


def _load_staged(config: HardenConfig, staged: Path) -> Any:
    from quarl_bench.zoo.forms import load_agent

    return load_agent(hardened_agent(config.ref, staged))


def _place(staged: Path, out: Path) -> None:
    """Move the staged agent and its folder to ``out`` (replacing an old one: ``--force`` was checked before)."""
    folder, target_folder = staged.with_suffix(""), out.with_suffix("")
    if target_folder.exists():
        shutil.rmtree(target_folder)
    os.replace(folder, target_folder)
    os.replace(staged, out)


def _provenance(config: HardenConfig, cost: Any, before: dict, after: dict, driver: dict[str, Any]) -> dict[str, Any]:
    return {
        "key": config.key,
        "parent": asdict(config.ref),
        "target": spec_identity(config.spec),
        "recipe": config.recipe.identity(),
        "budget": config.budget,
        "seed": config.seed,
        "env_steps": cost.env_steps,
        "gradient_steps": cost.gradient_steps,
        "seconds": cost.seconds,
        "before": before,
        "after": after,
        "version": HARDEN_VERSION,
        "driver": driver,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def hardened_row(config: HardenConfig, out: Path, record: dict[str, Any], driver: dict[str, Any]) -> dict[str, Any]:
    """The ``hardened`` table's row: the hardened agent's hash (as ``--model OUT`` names it) next to its parent's."""
    child = hardened_agent(config.ref, out)
    return {
        "key": config.key,
        "algo": config.ref.algo,
        "env_id": config.ref.env_id,
        "agent_hash": child.content_hash,
        "parent_hash": config.ref.content_hash,
        "recipe": config.recipe.name,
        "settings": config.recipe.identity(),
        "spec_json": record["target"],
        "budget": config.budget,
        "seed": config.seed,
        "env_steps": record["env_steps"],
        "gradient_steps": record["gradient_steps"],
        "seconds": record["seconds"],
        "path": str(out.resolve()),
        "before": record["before"],
        "after": record["after"],
        "provenance": driver,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
    }
