"""Which rows a reward-error table shows: a :class:`Variant`, everything about a job except the agent and the
precision, as ``ResultStore.select`` filters on it (the store parts a variant further where its fields leave two
questions together: ``ResultStore.variants``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from quarl_bench.types import QUANTIZER_VERSION, QuantSpec


@dataclass(frozen=True)
class Variant:
    """Which rows a table shows: everything about a job except the agent and the precision.

    Float precisions ignore granularity/symmetric/bias and fp32 ignores the layer mode (their specs are normalised
    the same way, see :class:`~quarl_bench.types.QuantSpec`), so they join every variant they belong to.
    """

    method: str = "ptq"
    seed: int = 0
    episodes: int = 100
    granularity: str = "auto"
    symmetric: bool = False
    quantize_bias: bool = False
    layers: str = "paper"
    quantizer_version: int = QUANTIZER_VERSION
    obs_noise: float = 0.0
    recipe: str = ""  # QuantSpec.recipe_label(): activations, groups, calibrated rounding, pruning
    perturbation: str = ""  # the condition played under ('' = nominal): a perturbed row never joins a nominal table
    judge: str = ""  # the user's function that judged each episode's outcome ('' = the env's info)
    # where the fields above leave two questions together (rows that differ in a field of the job they do not name:
    # envs, action mode, setting, ...), the derived question (store/question.py, less agent and precision) that
    # parts them, and what sets it apart in words; '' otherwise
    question: str = ""
    extra: str = ""

    def __post_init__(self) -> None:
        spec = QuantSpec("int8", self.granularity, self.symmetric, self.quantize_bias, layers=self.layers)
        object.__setattr__(self, "quantize_bias", spec.quantize_bias)
        object.__setattr__(self, "symmetric", bool(self.symmetric))  # stored as 0/1

    @property
    def is_default(self) -> bool:
        return self == Variant(self.method)

    def label(self) -> str:
        """What sets this variant apart from the default, e.g. ``seed 7, symmetric``; ``default`` if nothing."""
        default, parts = Variant(self.method), []
        for name in ("seed", "episodes", "granularity", "layers"):
            if getattr(self, name) != getattr(default, name):
                parts.append(f"{name} {getattr(self, name)}")
        parts += [name.replace("_", " ") for name in ("symmetric", "quantize_bias") if getattr(self, name)]
        if self.quantizer_version != QUANTIZER_VERSION:
            parts.append(f"quantizer v{self.quantizer_version}")
        if self.obs_noise:
            parts.append(f"obs noise {self.obs_noise:g}")
        if self.recipe:
            parts.append(self.recipe)
        parts += [f"perturbed {self.perturbation}"] if self.perturbation else []
        parts += [f"judged {self.judge}"] if self.judge else []
        parts += [self.extra] if self.extra else []
        return ", ".join(parts) or "default"

    def slug(self) -> str:
        """The label as a file-name suffix (a condition's ``=`` and ``,`` too: ``masspole-0.5+sticky-0.1``)."""
        if self.is_default:
            return ""
        text = self.label().replace(", ", "_").replace(" ", "-").replace(",", "+").replace("=", "-")
        return "__" + re.sub(r"[^A-Za-z0-9._+-]", "-", text)
