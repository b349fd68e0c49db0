"""The one table of RL algorithms, in the spirit of rl-zoo3's ``ALGOS`` (which gives each zoo algorithm's class):
what each algorithm is and what quarl-bench does with it. Importable without torch. A new algorithm is one entry
here (plus whatever is genuinely new about it); every other module asks this table, never a list of names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from quarl_bench.errors import QuarlError
from quarl_bench.registry import Registry

BOTH = ("discrete", "continuous")


@dataclass(frozen=True)
class Algorithm:
    """One algorithm's facts.

    :param name: rl-zoo3's name for it (its ``ALGOS`` key, and a zoo folder's name).
    :param on_policy: learns from its own fresh rollouts (no replay buffer: loading needs none).
    :param actions: the action spaces it acts in (``discrete``, ``continuous``).
    :param exploration: how it explores while training: ``sampling`` (a stochastic policy), ``epsilon-greedy`` (a
        scheduled ε; the zoo's Atari agents act with their final ε), ``action noise`` (a deterministic actor plus
        noise), ``entropy`` (a stochastic actor with a learned temperature) or ``parameter noise`` (ARS: random
        search over the weights).
    :param policy_module: the module of the policy class its SB3 zips save (several algorithms may share one; the
        zip's data then tells them apart: ``zoo/model_file.py``).
    :param zoo: an rl-zoo3 algorithm, with pretrained agents (zoo folders, the hub) and rl-zoo3 training.
    :param actorq_learner: ``module:Class`` of its fp32 ActorQ learner; empty: none.
    :param rollout_trainer: ``module:Class`` of its trainer on quantized rollouts; empty: none.
    :param recurrent: its policy carries a state from step to step (an LSTM): evaluation passes it on, PTQ reaches
        it (``--state-bits``), and only ONNX exports it (:mod:`quarl_bench.families.recurrent`).
    :param model_class: ``module:Class`` of its SB3 model where rl-zoo3's ``ALGOS`` has none (an sb3-contrib or
        user algorithm: its zips then load with ``--model``); empty: rl-zoo3's.
    """

    name: str
    on_policy: bool
    actions: tuple[str, ...]
    exploration: str
    policy_module: str
    zoo: bool = True
    actorq_learner: str = ""
    rollout_trainer: str = ""
    recurrent: bool = False
    model_class: str = ""

    @property
    def loadable(self) -> bool:
        """Its zips load (``--model``): rl-zoo3 knows its class, or ``model_class`` names it."""
        return self.zoo or bool(self.model_class)

    def model_type(self) -> Any:
        """Its SB3 model class (what loads its zips): rl-zoo3's, else ``model_class``.

        :raises QuarlError: for an algorithm with neither.
        """
        from rl_zoo3 import ALGOS as ZOO_ALGOS

        if self.name in ZOO_ALGOS:
            return ZOO_ALGOS[self.name]
        if not self.model_class:
            raise QuarlError(f"algorithm {self.name!r} has no model class: expected rl-zoo3's or a model_class")
        return _load(self.model_class)

    def actorq_class(self) -> Any:
        return _load(self.actorq_learner)

    def rollout_class(self) -> Any:
        return _load(self.rollout_trainer)


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


_ROLLOUTS = "quarl_bench.training.quantized_rollouts"
_SB3, _CONTRIB = "stable_baselines3", "sb3_contrib"
# fmt: off
ALGORITHMS: Registry[Algorithm] = Registry("algorithm")
for _entry in (
    Algorithm("a2c", True, BOTH, "sampling", f"{_SB3}.common.policies", rollout_trainer=f"{_ROLLOUTS}:RolloutA2C"),
    Algorithm("ppo", True, BOTH, "sampling", f"{_SB3}.common.policies", rollout_trainer=f"{_ROLLOUTS}:RolloutPPO"),
    Algorithm("dqn", False, ("discrete",), "epsilon-greedy", f"{_SB3}.dqn.policies", actorq_learner=f"{_SB3}:DQN"),
    Algorithm("ddpg", False, ("continuous",), "action noise", f"{_SB3}.td3.policies", actorq_learner=f"{_SB3}:DDPG"),
    Algorithm("sac", False, ("continuous",), "entropy", f"{_SB3}.sac.policies"),
    Algorithm("td3", False, ("continuous",), "action noise", f"{_SB3}.td3.policies", actorq_learner=f"{_SB3}:TD3"),
    Algorithm("qrdqn", False, ("discrete",), "epsilon-greedy", f"{_CONTRIB}.qrdqn.policies"),
    Algorithm("tqc", False, ("continuous",), "entropy", f"{_CONTRIB}.tqc.policies"),
    Algorithm("trpo", True, BOTH, "sampling", f"{_SB3}.common.policies"),
    Algorithm("ars", True, BOTH, "parameter noise", f"{_CONTRIB}.ars.policies"),
    Algorithm("crossq", False, ("continuous",), "entropy", f"{_CONTRIB}.crossq.policies"),
    Algorithm("ppo_lstm", True, BOTH, "sampling", f"{_CONTRIB}.common.recurrent.policies", recurrent=True),
    # sb3-contrib's MaskablePPO: no zoo agents; its zips load with --model, and evaluation passes the env's masks
    Algorithm("ppo_mask", True, ("discrete",), "sampling", f"{_CONTRIB}.common.maskable.policies", zoo=False, model_class=f"{_CONTRIB}:MaskablePPO"),
    # ActorQ's distributional learner (quarl_bench/algos/d4pg.py): no zoo agents
    Algorithm("d4pg", False, ("continuous",), "action noise", "", zoo=False, actorq_learner="quarl_bench.algos.d4pg:D4PG"),
):
    ALGORITHMS.add(_entry.name, _entry)
# fmt: on


def algorithm(name: str) -> Algorithm:
    """The algorithm ``name``; an unknown name is refused, naming the registered ones."""
    return ALGORITHMS.get(name)


names = ALGORITHMS.names  # the algorithms whose facts match (``zoo=True``, ``on_policy=False``, ...), in table order
# Lists of names by a fact, read from the table when asked (module attributes computed on access, so an algorithm
# registered later, by a plugin, is in them): what --algo, grids and zoo folders accept, and so on.
_LISTS: dict[str, Callable[[], tuple[str, ...]]] = {
    "ALGOS": lambda: names(zoo=True),
    "OFF_POLICY": lambda: names(on_policy=False),
    "EPSILON_GREEDY": lambda: names(exploration="epsilon-greedy"),
    "RECURRENT": lambda: names(recurrent=True),
    "ACTORQ_ALGOS": lambda: tuple(a.name for a in ALGORITHMS.entries.values() if a.actorq_learner),
    "ROLLOUT_ALGOS": lambda: tuple(a.name for a in ALGORITHMS.entries.values() if a.rollout_trainer),
}


def __getattr__(name: str) -> tuple[str, ...]:
    if name in _LISTS:
        return _LISTS[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_algo(algo: str) -> str:
    """``algo`` if it is a zoo algorithm.

    :raises QuarlError: naming it and those that are.
    """
    zoo = names(zoo=True)
    if algo not in zoo:
        raise QuarlError(f"unknown algo {algo!r}: expected one of {', '.join(zoo)}")
    return algo
