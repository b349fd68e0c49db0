"""``obs-noise-raw=σ``: a sensor's Gaussian noise of standard deviation σ in the env's own units (metres, radians), on
the observation as the env makes it, before the agent's normalisation: the same noise for a policy and for the
artifact exported from it, which takes raw observations. With ``@key`` (``obs-noise-raw@desired_goal=0.01``: a
goal estimated to 1 cm) or ``@i:j`` it perturbs that part only."""

from __future__ import annotations

from quarl_bench.perturbations import PerturbationKind, register_perturbation
from quarl_bench.perturbations.observation_noise_abs import observe  # the same draw; only where it applies differs

register_perturbation(
    PerturbationKind(
        "obs-noise-raw",
        "observation",
        0.0,
        1000.0,
        "Gaussian std in the env's own units, before the agent's normalisation; @KEY or @i:j for one part",
        order=4,
        observe=observe,
        scaled=False,
        raw=True,
    )
)
