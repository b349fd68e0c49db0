"""How an evaluated policy picks its actions (rl-zoo3's ``enjoy`` rules): part of every job's identity."""

from __future__ import annotations

from dataclasses import dataclass

from quarl_bench.errors import QuarlError

ACTION_MODES = ("deterministic", "sampled", "epsilon-greedy")


@dataclass(frozen=True)
class ActionMode:
    """How the evaluated policy picks actions, as rl-zoo3's ``enjoy`` does.

    :param kind: ``deterministic`` (greedy / mean action), ``sampled`` (from the policy's distribution: Atari
        PPO/A2C) or ``epsilon-greedy`` (Atari DQN/QR-DQN: greedy, or with the model's final exploration rate a
        uniform action; one coin per env and step, see ``evaluate.Actor``).
    :param epsilon: the exploration rate for ``epsilon-greedy``; 0 otherwise.
    """

    kind: str = "deterministic"
    epsilon: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ACTION_MODES:
            raise QuarlError(f"bad action mode {self.kind!r}: expected one of {', '.join(ACTION_MODES)}")
        if self.kind != "epsilon-greedy":
            object.__setattr__(self, "epsilon", 0.0)

    @property
    def deterministic(self) -> bool:
        """The ``deterministic`` flag passed to ``predict``."""
        return self.kind == "deterministic"

    def __str__(self) -> str:
        return f"epsilon-greedy({self.epsilon:g})" if self.kind == "epsilon-greedy" else self.kind
