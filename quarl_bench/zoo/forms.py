"""The forms an agent is stored in, one adapter each (an SB3 zip, a user's torch module, an ONNX graph), and the one
place that loads an agent (:func:`load_agent`): stages ask ``form_of(ref)`` how to load, act, count training steps or
save a fine-tuned copy, instead of branching on the algo's name. What a row's algo says for a policy that is no SB3
agent (``torch-module``, ``onnx``) names its form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StoredForm:
    """How an agent of one kind is stored, and so loaded, saved and fine-tuned: one adapter per form, which stages
    ask (``form_of(ref).load(ref)``, ``form_of(ref).action_mode(ref)``) instead of branching on its kind's name. Importable
    without torch: each method imports what it needs.

    :param sb3_model: an SB3 model zip (an RL algorithm's: its loss, its saved hyperparameters and normalisation
        stats beside it); otherwise a user's torch module or ONNX graph, with no RL algorithm.
    :param module_file: a torch module given as a Python function (``--policy-module``), written back as one.
    :param graph: an ONNX graph, fine-tuned only through its torch twin.
    """

    sb3_model: bool = True
    module_file: bool = False
    graph: bool = False

    @property
    def suffix(self) -> str:
        """The file a saved agent of this form is: an SB3 zip, or an ONNX graph (a torch module is written as one)."""
        return ".zip"

    def shape(self, ref: Any) -> str:
        """What shape of policy it is beyond one action per observation (a certificate names it): '' here."""
        return ""

    def load(self, ref: Any) -> Any:
        """The agent ``ref`` names, loaded (:class:`~quarl_bench.zoo.agents.LoadedAgent`)."""
        from quarl_bench.zoo.agents import load_sb3_agent

        return load_sb3_agent(ref)

    def action_mode(self, ref: Any) -> Any:
        """rl-zoo3's ``enjoy``: deterministic, except on Atari, where actions are stochastic: sampled from the
        policy for PPO/A2C, and the model's epsilon-greedy ``predict`` at its saved (final) exploration rate for
        DQN/QR-DQN."""
        from quarl_bench.action_modes import ActionMode
        from quarl_bench.errors import QuarlError
        from quarl_bench.zoo.agents import saved_exploration_rate
        from quarl_bench.zoo.algorithms import EPSILON_GREEDY
        from quarl_bench.zoo.envs import env_kind

        if env_kind(ref.env_id) != "atari":
            return ActionMode("deterministic")
        if ref.algo in EPSILON_GREEDY:
            epsilon = saved_exploration_rate(ref)
            if epsilon is None:
                raise QuarlError(f"agent {ref.run_dir} has no saved exploration_rate: expected an SB3 {ref.algo} zip")
            return ActionMode("epsilon-greedy", epsilon)
        return ActionMode("sampled")

    def training_steps(self, ref: Any) -> int | None:
        """The agent's own training steps: ``n_timesteps`` of its saved ``config.yml``, else rl-zoo3's for its algo
        and env (None where rl-zoo3 has none)."""
        from quarl_bench.config import zoo_hyperparameters
        from quarl_bench.zoo.agents import zip_path_of
        from quarl_bench.zoo.model_file import saved_config, stats_dir

        steps = saved_config(stats_dir(zip_path_of(ref))).get("n_timesteps")
        if steps is None:
            steps = zoo_hyperparameters(ref.algo, ref.env_id).get("n_timesteps")
        return int(float(steps)) if steps is not None else None

    def file_stem(self, ref: Any) -> str:
        """The name a copy of the agent is saved under (rl-zoo3's for a zoo agent)."""
        return str(ref.saved_name)

    def model_algo(self, ref: Any) -> str | None:
        """The algo a saved copy is read back as (``--model``'s ``--algo``; None: read from the file)."""
        return str(ref.algo)

    def refuse_fine_tuning(self, ref: Any, recipe: str, distills: bool) -> None:
        """Refuse, before loading, what this form cannot be fine-tuned by (``harden``'s ``recipe``)."""

    def save_fine_tuned(self, agent: Any, ref: Any, path: Any) -> None:
        """Write a fine-tuned copy of ``agent`` at ``path`` (in this form's own file kind)."""
        agent.model.save(path)

    def keep_beside(self, agent: Any, path: Any) -> None:
        """Copy what a saved copy at ``path`` needs beside it: the parent's saved hyperparameters and normalisation
        (rl-zoo3's ``{stem}/`` folder)."""
        import shutil
        from pathlib import Path

        from quarl_bench.zoo.saving import COPIED_FILES

        if not agent.stats_path:
            return
        folder = Path(path).with_suffix("")
        folder.mkdir(exist_ok=True)
        for name in COPIED_FILES:
            source = Path(agent.stats_path) / name
            if source.is_file():
                shutil.copyfile(source, folder / name)

    def refuse_calibrated(self, ref: Any, why: str = "") -> None:
        """Refuse, before loading, calibrated PTQ (activations, calibrated rounding) or fine-tuning (``why``) of a
        policy this form cannot calibrate."""


@dataclass(frozen=True)
class ModuleForm(StoredForm):
    """A user's torch module (``--policy-module FILE.py:FN``): no RL algorithm, saved back as ONNX and its function."""

    sb3_model: bool = False
    module_file: bool = True

    @property
    def suffix(self) -> str:
        return ".onnx"

    def load(self, ref: Any) -> Any:
        from quarl_bench.zoo.agents import load_foreign

        return load_foreign(ref)

    def shape(self, ref: Any) -> str:
        """``chunk 10, 5 executed`` for a module declaring an action chunk (``zoo/chunked.py``), else ''."""
        from quarl_bench.zoo.chunk_policies import chunk_label

        return chunk_label(ref.model_path)

    def action_mode(self, ref: Any) -> Any:
        from quarl_bench.action_modes import ActionMode

        return ActionMode("deterministic")  # no model to sample or explore

    def training_steps(self, ref: Any) -> int | None:
        return None  # no RL training recorded

    def file_stem(self, ref: Any) -> str:
        return "policy"

    def model_algo(self, ref: Any) -> str | None:
        return None

    def refuse_fine_tuning(self, ref: Any, recipe: str, distills: bool) -> None:
        from quarl_bench.errors import QuarlError

        if not distills:
            raise QuarlError(
                f"recipe {recipe!r} trains with the RL algorithm's loss, and a torch-module or ONNX policy has none: "
                "expected a distill recipe (distill, distill+noise, distill+sam)"
            )

    def keep_beside(self, agent: Any, path: Any) -> None:
        return None  # no saved hyperparameters or normalisation of its own

    def save_fine_tuned(self, agent: Any, ref: Any, path: Any) -> None:
        from quarl_bench.zoo.saving import save_module, save_onnx

        save_onnx(agent.model.policy, path)
        save_module(agent.model.policy, ref, path.with_suffix(""))  # read back as torch, as its parent was


@dataclass(frozen=True)
class GraphForm(ModuleForm):
    """An ONNX graph (``--model policy.onnx``): played as its own graph, fine-tuned and calibrated only through
    its torch twin (a graph that is one MLP chain)."""

    module_file: bool = False
    graph: bool = True

    def load(self, ref: Any) -> Any:
        from quarl_bench.zoo.agents import graph_policy, load_foreign

        return load_foreign(ref, graph_policy)

    def shape(self, ref: Any) -> str:
        from quarl_bench.zoo.onnx_chunk import sidecar_label

        return sidecar_label(ref.model_path)  # a chunk graph's sidecar declares its shape

    def refuse_fine_tuning(self, ref: Any, recipe: str, distills: bool) -> None:
        self.refuse_calibrated(ref, "harden fine-tunes torch weights, and this ONNX policy is played as its own graph")
        super().refuse_fine_tuning(ref, recipe, distills)

    def save_fine_tuned(self, agent: Any, ref: Any, path: Any) -> None:
        from quarl_bench.zoo.saving import save_onnx

        save_onnx(agent.model.policy, path)

    def refuse_calibrated(self, ref: Any, why: str = "") -> None:
        from pathlib import Path

        from quarl_bench.errors import QuarlError
        from quarl_bench.families.module import onnx_refusal
        from quarl_bench.zoo.foreign import chain_reading

        reading = chain_reading(Path(ref.model_path).read_bytes())
        if reading.module is None:
            if why:
                raise QuarlError(
                    f"{why}: {reading.reason} (expected a graph that is one MLP chain, a zoo agent, an SB3 zip or "
                    "--policy-module)"
                )
            raise QuarlError(onnx_refusal(reading.reason))


# What a row's algo says for a policy that is no SB3 agent: a user's torch module or ONNX graph.
FOREIGN_FORMS: dict[str, StoredForm] = {"torch-module": ModuleForm(), "onnx": GraphForm()}
SB3_FORM = StoredForm()


def stored_form(algo: str) -> StoredForm:
    """The form an agent of row algo ``algo`` is stored in."""
    return FOREIGN_FORMS.get(algo, SB3_FORM)


def form_of(ref: Any) -> StoredForm:
    """The form the agent ``ref`` names is stored in: its adapter, which stages ask instead of its algo's name."""
    return stored_form(ref.algo)


def carries_state(ref: Any) -> bool:
    """Whether the agent's policy carries a recurrent state (its algorithm's registered fact), known before loading."""
    from quarl_bench.zoo.algorithms import ALGORITHMS

    return ref.algo in ALGORITHMS.names() and ALGORITHMS.get(ref.algo).recurrent


def load_agent(ref: Any) -> Any:
    """Load the agent ``ref`` names, by its form (:class:`~quarl_bench.zoo.agents.LoadedAgent`): an SB3 zip with its
    saved hyperparameters (old, ``gym``-pickled 2021 zips included), a torch module or an ONNX graph.

    :raises QuarlError: for a corrupt zip or unreadable normalisation stats.
    """
    from quarl_bench.zoo.envs import import_env_packages

    import_env_packages(ref.env_packages)
    return form_of(ref).load(ref)
