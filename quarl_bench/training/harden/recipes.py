"""The hardening recipes, one registered dataclass each, whose fields are the recipe's settings (they go in the
hardening job's key). A recipe name joins parts with ``+``: ``distill``, ``sam``, ``noise``, ``distill+noise``,
``distill+sam``, ``sam+noise``, ...

- ``distill``: the loss is distillation towards the fp32 teacher (no env reward); without it the loss is the RL
  algorithm's own (rl-zoo3's hyperparameters).
- ``sam``: the optimizer takes sharpness-aware steps (``training/sam.py``).
- ``noise``: the student's weights get uniform noise of one target-grid step instead of being rounded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from quarl_bench.errors import QuarlError

# A setting added after hardenings were stored enters the key only away from its default, whose behaviour is the
# one before it: stored keys never change. (action_fp32_weight changed continuous policies' distillation before
# any release stored one: only values and logits kept their behaviour.)
ADDED = "added"


@dataclass(frozen=True)
class Distill:
    """Quantization-aware distillation of a fake-quantized student (straight-through estimator) towards the fp32
    teacher, on states from the teacher's and then the student's own rollouts.

    :param rounds: student rollouts after the teacher's (each followed by training on every state so far).
    :param teacher_share: the share of the env-step budget the teacher's rollouts take.
    :param epochs: passes over the collected states after each rollout.
    :param batch_size: states per gradient step.
    :param learning_rate: Adam's.
    :param margin: Q-networks: the lead the teacher's best action must keep over the others, in units of what
        rounding the teacher to the target grid moves its values (0: no margin term).
    :param fp32_weight: the loss of the unquantized student is added with this weight (it must stay as good).
    :param action_fp32_weight: the same for continuous actions, which have no margin to absorb drift: at 1, sac
        HalfCheetah's hardened fp32 fell from 9400 to 6800 (certified worse); at 4 it kept 9200.
    :param epoch_states: an epoch passes over at most this many states, drawn afresh from all so far (a budget of
        500k states, a2c LunarLanderContinuous's tenth, would otherwise cost 220k gradient steps).
    """

    name: ClassVar[str] = "distill"
    rounds: int = 4
    teacher_share: float = 0.5
    epochs: int = 30
    batch_size: int = 256
    learning_rate: float = 3e-4
    margin: float = 0.5
    fp32_weight: float = 1.0
    epoch_states: int = field(default=20_000, metadata={ADDED: True})
    action_fp32_weight: float = field(default=4.0, metadata={ADDED: True})


@dataclass(frozen=True)
class Sam:
    """Sharpness-aware minimisation (Foret et al. 2021) of whatever loss the recipe trains.

    :param rho: the ascent radius.
    :param learning_rate_scale: with the RL loss, the zoo's learning rate times this (see ``rl_loss.py``).
    """

    name: ClassVar[str] = "sam"
    rho: float = 0.05
    learning_rate_scale: float = 0.01


@dataclass(frozen=True)
class Noise:
    """Weight-noise injection: the student computes with ``w + u``, ``u`` uniform in ±``scale``/2 target-grid steps
    (per output channel where the target's grid is), drawn afresh each forward pass.

    :param scale: the noise's width in grid steps.
    :param learning_rate_scale: with the RL loss, the zoo's learning rate times this (see ``rl_loss.py``).
    """

    name: ClassVar[str] = "noise"
    scale: float = 1.0
    learning_rate_scale: float = 0.01


RECIPE_PARTS: dict[str, type] = {part.name: part for part in (Distill, Sam, Noise)}
RECIPES = ("distill", "sam", "noise", "distill+noise", "distill+sam", "sam+noise", "distill+sam+noise")


@dataclass(frozen=True)
class Recipe:
    """A recipe: its parts in canonical order, each with its settings."""

    parts: tuple[Any, ...]

    @property
    def name(self) -> str:
        return "+".join(part.name for part in self.parts)

    def part(self, name: str) -> Any:  # the named part's settings (Distill, Noise, Sam...), None when absent
        return next((p for p in self.parts if p.name == name), None)

    @property
    def distills(self) -> bool:
        """Distillation loss (no env reward) rather than the RL algorithm's loss."""
        return self.part("distill") is not None

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "settings": {part.name: _settings(part) for part in self.parts}}


def _settings(part: Any) -> dict[str, Any]:
    """A part's settings for the key: every field, but those added later only where they differ from the default."""
    values = asdict(part)
    for spec in fields(part):
        if spec.metadata.get(ADDED) and values[spec.name] == spec.default:
            del values[spec.name]
    return values


def parse_recipe(text: str, settings: dict[str, dict[str, Any]] | None = None) -> Recipe:
    """``distill+noise`` (and per-part settings, ``{"distill": {"margin": 0.2}}``) as a :class:`Recipe`.

    :raises QuarlError: naming an unknown recipe or setting and the accepted ones.
    """
    names = [name.strip() for name in text.split("+")]
    canonical = (
        "+".join(sorted(dict.fromkeys(names), key=list(RECIPE_PARTS).index)) if set(names) <= set(RECIPE_PARTS) else ""
    )
    if canonical not in RECIPES:
        raise QuarlError(f"unknown recipe {text!r}: expected one of {', '.join(RECIPES)}")
    parts = []
    settings = settings or {}
    for name in settings:
        if name not in canonical.split("+"):
            raise QuarlError(
                f"bad settings for {name!r}: recipe {canonical!r} has parts {canonical.replace('+', ', ')}"
            )
    for name in canonical.split("+"):
        part = RECIPE_PARTS[name]
        given = settings.get(name, {})
        known = {f.name for f in fields(part)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise QuarlError(f"unknown {name} setting {unknown[0]!r}: expected one of {', '.join(sorted(known))}")
        parts.append(part(**given))
    _check(parts)
    return Recipe(tuple(parts))


def _check(parts: list[Any]) -> None:
    for part in parts:
        if isinstance(part, Distill):
            if part.rounds < 0 or not 0 < part.teacher_share <= 1 or min(part.epochs, part.batch_size) < 1:
                raise QuarlError(
                    f"bad distill settings {asdict(part)}: expected rounds >= 0, teacher_share in (0, 1], "
                    "epochs >= 1 and batch_size >= 1"
                )
            if part.epoch_states < part.batch_size:
                raise QuarlError(f"bad distill epoch_states {part.epoch_states}: expected at least batch_size states")
            if part.learning_rate <= 0 or part.margin < 0 or min(part.fp32_weight, part.action_fp32_weight) < 0:
                raise QuarlError(
                    f"bad distill settings {asdict(part)}: expected learning_rate > 0, margin >= 0 and fp32 weights >= 0"
                )
        if isinstance(part, Sam) and not part.rho > 0:
            raise QuarlError(f"bad sam rho {part.rho:g}: expected a radius > 0, e.g. 0.05")
        if isinstance(part, Noise) and not part.scale > 0:
            raise QuarlError(f"bad noise scale {part.scale:g}: expected a width in grid steps > 0, e.g. 1")
        if isinstance(part, Sam | Noise) and not 0 < part.learning_rate_scale <= 1:
            raise QuarlError(
                f"bad {part.name} learning_rate_scale {part.learning_rate_scale:g}: expected a share of the zoo's "
                "learning rate in (0, 1]"
            )
