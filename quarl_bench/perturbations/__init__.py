"""Conditions a policy is played under besides the nominal simulator (``--perturb``): one registered
:class:`PerturbationKind` per name, each in a module of this package, and the condition value every layer carries
(:class:`Perturbation`, parsed once at the edge by :func:`parse_perturbation` into its canonical text).

A condition is ``name=severity`` pairs, comma-separated (``obs-noise=0.1,action-delay=1``); a **mixture**,
``name~a/b/c``, draws the severity of each episode uniformly from the list (the suite's distribution, decided over in
one certification), where ``name=a/b/c`` is a grid of three conditions (certify's), decided one by one.

An observation kind may name what it perturbs: ``obs-noise-raw@desired_goal=0.01`` (one key of a Dict observation:
the goal estimate), ``obs-noise@3=0.1`` or ``obs-noise@0:3=0.1`` (dimensions of a Box, or of the flat Dict);
without a target it perturbs every value the policy sees.

A kind says what it touches: the ``observation`` the policy sees, the ``action`` the env receives, the ``reset``
(where an episode starts) or the ``dynamics`` (a parameter of the simulator, scaled per episode), its severity's
range, and the hooks :class:`~quarl_bench.evaluation.perturbations.PerturbedEnv` calls. A new perturbation is one
module here: its registration reaches parsing, validation, help and refusals, and the wrapper. No torch and no SB3
are imported here (``--help`` lists the names).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from quarl_bench.errors import QuarlError
from quarl_bench.registry import Registry

TOUCHES = ("observation", "action", "reset", "dynamics")
# Each episode's generator is seeded (job seed, STREAM, env index, episode number): apart from the evaluation's own
# draws, so fp32 and the quantized policy meet the same perturbation on the same paired episode.
STREAM = 0x5EED


@dataclass(frozen=True)
class PerturbationKind:
    """One perturbation (``--perturb NAME=SEVERITY``).

    :param name: its name in a condition.
    :param touches: ``observation``, ``action``, ``reset`` or ``dynamics``.
    :param low: the smallest severity accepted.
    :param high: the largest severity accepted.
    :param help: what a severity means, for ``--help`` and the docs.
    :param integer: severities are whole numbers (a delay in steps).
    :param mixable: a severity may be drawn per episode (``name~a/b``); False for what is set once per env.
    :param order: where it applies among the kinds touching the same step (lower first).
    :param act: ``(action, severity, memory, rng, action_space) -> action`` for an action kind; ``memory`` is the
        env's dict for this episode (a delay queue, the previous action).
    :param observe: ``(observation, severity, memory, rng, scale) -> observation`` for an observation kind (one env's
        row; ``memory``: as for ``act``; ``scale``: each dimension's spread over the fp32 policy's fixed states).
    :param wrap: ``(env, severity)`` once per (unwrapped) env when the condition is put on (a reset kind).
    :param read: ``env -> nominal value`` of a dynamics parameter; :param write: ``(env, value)``.
    :param accepts: ``env_id -> bool``: whether this env has what it perturbs (a dynamics parameter, a start range).
    :param why_not: what a refusal says where ``accepts`` is False (before the list of what the env accepts).
    :param scaled: an observation kind that reads each dimension's spread (``scale``: the fp32 policy's fixed states
        are measured for it); False: it needs none, and plays on a Dict observation key by key.
    :param raw: an observation kind applied to the observation as the env makes it (its own units: metres,
        radians), before the agent's normalisation; else to what the policy sees, after it.
    """

    name: str
    touches: str
    low: float
    high: float
    help: str
    integer: bool = False
    mixable: bool = True
    order: int = 0
    act: Callable[..., Any] | None = None
    observe: Callable[..., Any] | None = None
    wrap: Callable[[Any, float], None] | None = None
    read: Callable[[Any], Any] | None = None
    write: Callable[[Any, Any], None] | None = None
    accepts: Callable[[str], bool] = lambda env_id: True
    why_not: str = "the env has no such parameter"
    scaled: bool = True
    raw: bool = False

    def __post_init__(self) -> None:
        if self.touches not in TOUCHES:
            raise QuarlError(
                f"bad perturbation kind {self.name!r}: touches {self.touches!r}, expected one of {TOUCHES}"
            )


PERTURBATIONS: Registry[PerturbationKind] = Registry(
    "perturbation",
    package=__name__,
    first=("observation_noise", "action_noise", "action_delay", "sticky", "initial_spread", "dynamics"),
)


def register_perturbation(kind: PerturbationKind) -> PerturbationKind:
    """Register ``kind`` under its name (from the calling module)."""
    return PERTURBATIONS.add(kind.name, kind)


def kinds() -> list[PerturbationKind]:
    """Every registered kind: by what it touches (observation, action, reset, dynamics), then its order."""
    found = [PERTURBATIONS.get(name) for name in PERTURBATIONS.names()]
    return sorted(found, key=lambda kind: (TOUCHES.index(kind.touches), kind.order))


def accepted_by(env_id: str) -> list[str]:
    """The names an env accepts (what a refusal for it lists)."""
    return [kind.name for kind in kinds() if kind.accepts(env_id)]


def help_text() -> str:
    """``--perturb``'s help: every registered kind and what its severity means."""
    return "; ".join(f"{kind.name} ({kind.help})" for kind in kinds())


@dataclass(frozen=True)
class Perturbation:
    """One condition: severities by name, and mixtures (a severity drawn per episode from a list); ``text`` is its
    canonical spelling, part of a job's identity."""

    severities: tuple[tuple[str, float], ...]
    mixtures: tuple[tuple[str, tuple[float, ...]], ...] = ()

    @property
    def text(self) -> str:
        parts = {name: f"{name}={value:g}" for name, value in self.severities}
        parts |= {name: f"{name}~" + "/".join(f"{v:g}" for v in values) for name, values in self.mixtures}
        return ",".join(parts[name] for name in sorted(parts))

    @property
    def names(self) -> tuple[str, ...]:
        """Every kind it uses, fixed or mixed, sorted."""
        return tuple(sorted({name for name, _ in self.severities} | {name for name, _ in self.mixtures}))

    def get(self, name: str, default: float = 0.0) -> float:
        """A fixed severity (a mixture's is drawn per episode: :meth:`drawn`)."""
        return dict(self.severities).get(name, default)

    def uses(self, name: str) -> bool:
        return name in dict(self.severities) or name in dict(self.mixtures)

    def touching(self, what: str) -> list[PerturbationKind]:
        """The kinds it uses that touch ``what`` (``action``, ...), in their order of application."""
        found = {kind_of(name) for name in self.names}
        return sorted((kind for kind in found if kind.touches == what), key=lambda kind: (kind.order, kind.name))

    def terms(self, what: str) -> list[Term]:
        """Each ``name[@target]`` it uses that touches ``what``, with its kind, in their order of application."""
        found = [Term(name, kind_of(name), target_of(name)) for name in self.names]
        return sorted(
            (term for term in found if term.kind.touches == what), key=lambda term: (term.kind.order, term.name)
        )

    @property
    def dynamics(self) -> tuple[str, ...]:
        """The dynamics parameters it changes, fixed or mixed."""
        return tuple(kind.name for kind in sorted(self.touching("dynamics"), key=lambda kind: kind.name))

    def drawn(self, rng: np.random.Generator) -> dict[str, float]:
        """One episode's severities: the fixed ones, and each mixture's drawn uniformly from its list."""
        return dict(self.severities) | {name: float(rng.choice(values)) for name, values in self.mixtures}

    def axis(self) -> tuple[str, float]:
        """The curve it belongs to (its names; a mixture's ends in ``~``) and its severity along it: the first fixed
        severity, else the first mixture's mean (the robustness figures' x axis)."""
        names = [name for name, _ in self.severities] + [f"{name}~" for name, _ in self.mixtures]
        if self.severities:
            return ",".join(sorted(names)), float(self.severities[0][1])
        if self.mixtures:
            return ",".join(sorted(names)), float(np.mean(self.mixtures[0][1]))
        return "", 0.0


@dataclass(frozen=True)
class Term:
    """One ``name[@target]`` of a condition: its name in the condition (the key of its severity), its kind, and
    what it perturbs ('' for everything the kind touches; a Dict key, or Box dimensions ``i`` / ``i:j``)."""

    name: str
    kind: PerturbationKind
    target: str = ""


def kind_of(name: str) -> PerturbationKind:
    """The registered kind of a condition's ``name[@target]``."""
    return PERTURBATIONS.get(name.partition("@")[0])


def target_of(name: str) -> str:
    """What ``name[@target]`` perturbs ('' for everything its kind touches)."""
    return name.partition("@")[2]


def dimensions(target: str, size: int) -> slice | None:
    """The columns a dimension target (``3``, ``0:3``) names in a vector of ``size``, or None for a key name.

    :raises QuarlError: for dimensions outside the vector.
    """
    start, colon, stop = target.partition(":")
    if not start.isdigit() or (colon and not stop.isdigit()):
        return None
    columns = slice(int(start), int(stop) if colon else int(start) + 1)
    if not columns.start < columns.stop <= size:
        raise QuarlError(
            f"bad perturbation target @{target}: the observation has {size} dimensions, expected i or i:j "
            f"with 0 <= i < j <= {size}"
        )
    return columns


EXAMPLE = "e.g. obs-noise=0.1, obs-noise-raw@desired_goal=0.01 or masspole=0.2"


def parse_perturbation(text: str) -> Perturbation:
    """A condition from ``name=severity,...`` (empty: none).

    :raises QuarlError: in one line, for a name or severity outside what is accepted.
    """
    found: dict[str, float] = {}
    mixed: dict[str, tuple[float, ...]] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "~" in part and "=" not in part:
            name, _, values = part.partition("~")
            kind = _kind(name, part)
            if not kind.mixable:
                raise QuarlError(f"bad perturbation {part!r}: {name} is set once, expected {name}=S")
            mixed[name] = tuple(_severity(kind, value, part) for value in values.split("/"))
            continue
        name, equals, value = part.partition("=")
        if "/" in value:
            raise QuarlError(
                f"bad perturbation {part!r}: a severity grid (a/b/c) is certify's; run and sensitivity play one "
                "condition, NAME=SEVERITY"
            )
        if not equals:
            raise QuarlError(f"bad perturbation {part!r}: expected NAME=SEVERITY, {EXAMPLE}")
        found[name] = _severity(_kind(name, part), value, part)
    both = sorted(found.keys() & mixed.keys())
    if both:
        raise QuarlError(f"bad perturbation {both[0]!r}: given both fixed (=) and mixed (~), expected one")
    return Perturbation(
        tuple(sorted((name, value) for name, value in found.items() if value)),
        tuple(sorted(mixed.items())),
    )


def _kind(name: str, part: str) -> PerturbationKind:
    base, at, target = name.partition("@")
    if base not in PERTURBATIONS:
        raise QuarlError(
            f"bad perturbation {part!r}: expected NAME=SEVERITY with NAME one of {', '.join(k.name for k in kinds())}"
        )
    kind = PERTURBATIONS.get(base)
    if at and kind.touches != "observation":
        raise QuarlError(
            f"bad perturbation {part!r}: {base} touches the {kind.touches}, which has no parts to name; expected "
            "@TARGET on an observation kind only"
        )
    if at and not target.replace("_", "").replace(":", "").replace("-", "").isalnum():
        raise QuarlError(
            f"bad perturbation {part!r}: expected {base}@KEY (a Dict observation's key) or {base}@i / @i:j (dimensions)"
        )
    return kind


def _severity(kind: PerturbationKind, value: str, part: str) -> float:
    """:raises QuarlError: for a severity that is no number or lies outside its kind's range."""
    try:
        severity = float(value)
    except ValueError:
        severity = float("nan")
    if not np.isfinite(severity):
        raise QuarlError(f"bad perturbation {part!r}: expected NAME=SEVERITY, {EXAMPLE}")
    if not kind.low <= severity <= kind.high or (kind.integer and severity != int(severity)):
        what = "an integer" if kind.integer else "a severity"
        raise QuarlError(f"bad severity {value} for {kind.name}: expected {what} in [{kind.low:g}, {kind.high:g}]")
    return severity
