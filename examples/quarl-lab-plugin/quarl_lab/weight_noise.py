"""``weight-noise``: a control for "is quantization just noise?". Each acting weight gets uniform noise of the
quantization error's size at the asked integer width (U(-Δ/2, Δ/2), Δ the per-tensor grid step QuaRL's affine
quantizer would use), seeded per job, and the policy plays the job's seeded episodes. Certify it beside PTQ
(``certify --method weight-noise``) to see whether a width's harm is the grid or just the error's size."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from quarl_bench.errors import QuarlError
from quarl_bench.methods.agent_evaluation import AgentEvaluation
from quarl_bench.methods.protocol import OfAgent, register, register_evaluator
from quarl_bench.types import QuantSpec


@dataclass(frozen=True)
class WeightNoiseConfig(OfAgent):
    """Noise of each integer width's rounding error on an existing agent's acting weights.

    :param specs: the integer widths whose error size the noise takes (fp32: the agent itself).
    """

    specs: tuple[QuantSpec, ...] = ()
    method: ClassVar[str] = "weight-noise"


@register(WeightNoiseConfig)
class WeightNoiseHandler(AgentEvaluation):
    """Plays an existing agent's jobs, each by the evaluator below (the handler every agent-evaluating method uses)."""


def noisy_copy(policy: Any, spec: QuantSpec, seed: int) -> Any:
    """A copy of ``policy`` whose acting weights carry U(-Δ/2, Δ/2) noise, Δ = (max - min) / (2^bits - 1) per tensor."""
    import copy

    import torch

    from quarl_bench.zoo.policy import as_policy

    if not spec.number_format.is_int:
        raise QuarlError(f"weight-noise: bad precision {spec.precision!r}: expected an integer width (int2-int16)")
    noisy = copy.deepcopy(policy)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, layer in as_policy(noisy).acting_layers():
            weight = layer.weight
            step = (weight.max() - weight.min()) / (2**spec.number_format.bits - 1)
            noise = (torch.rand(weight.shape, generator=generator) - 0.5) * step
            weight.add_(noise.to(weight.dtype))
    return noisy


@register_evaluator("weight-noise")
def play_with_noise(agent: Any, job: Any, driver: dict[str, Any], eval_workers: int = 1) -> Any:
    """Play ``job``'s episodes with the agent's policy under its width's noise (fp32: the policy itself)."""
    from quarl_bench.methods.playing import job_result, play_job

    fp32 = agent.model.policy
    fp32.set_training_mode(False)
    policy = fp32 if job.spec.is_identity else noisy_copy(fp32, job.spec, job.seed)
    episodes = play_job(agent, job, policy, None if job.spec.is_identity else fp32, eval_workers)
    return job_result(agent, job, episodes, driver, provenance={"noise": "uniform, the width's grid step"})
