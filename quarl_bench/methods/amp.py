"""Mixed precision (handler of method ``amp``, QuaRL §5): the same rl-zoo3 job trained in fp32 and in standard mixed
precision (``mixed_precision``: autocast forwards, fp32 master weights and loss, loss scaling for fp16), on the same
device, timed per gradient update."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

from quarl_bench.deploy.machine import cpu_model, device_record, half_features, load_record
from quarl_bench.methods.agent_evaluation import TrainedAgentEvaluation
from quarl_bench.methods.protocol import register
from quarl_bench.store.provenance import TRAINING_RECORD
from quarl_bench.training.amp_hooks import enable_mixed_precision
from quarl_bench.types import AgentRef
from quarl_bench.zoo.agents import find_in_folder
from quarl_bench.zoo.algorithms import check_algo
from quarl_bench.zoo.train import train_with_callbacks

# Policy A/B/C of the paper were Pong CNNs; on a CPU-only machine MLP widths play that role.
POLICY_SIZES: dict[str, list[int]] = {"small": [64, 64], "medium": [256, 256], "large": [1024, 1024, 1024]}


def default_dtype() -> str:
    """The autocast type: fp16 on a GPU, bf16 on a CPU (CPU autocast has no fp16 matmul kernels)."""
    return "fp16" if torch.cuda.is_available() else "bf16"


@dataclass(frozen=True)
class AmpConfig:
    """One training run: ``dtype`` is ``fp32`` or the autocast type (``bf16`` on CPU, ``fp16`` on a GPU)."""

    algo: str
    env_id: str
    arch: str
    dtype: str
    n_timesteps: int
    seed: int = 0
    device: str = "cpu"

    method: ClassVar[str] = "amp"

    def __post_init__(self) -> None:
        check_algo(self.algo)

    def folder(self, cache_dir: Path) -> Path:
        # v2: mixed precision around forwards only (v1 autocast the whole train(), and DQN stopped learning)
        return cache_dir / "amp" / f"v2-{self.arch}-{self.dtype}-{self.device}-steps{self.n_timesteps}-seed{self.seed}"


@dataclass
class TrainClock:
    """Wall-clock spent inside ``model.train()`` (the gradient updates) and how many updates it made."""

    seconds: float = 0.0
    updates: int = 0


def timed_train(model: OnPolicyAlgorithm | OffPolicyAlgorithm, clock: TrainClock) -> None:
    """Wrap ``model.train`` so its gradient updates are timed (on a GPU, up to the last kernel)."""
    original = model.train
    synchronize = torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)

    def train(*args: Any, **kwargs: Any) -> None:
        before = model._n_updates
        synchronize()
        start = time.perf_counter()
        original(*args, **kwargs)
        synchronize()
        clock.seconds += time.perf_counter() - start
        clock.updates += model._n_updates - before

    model.train = train  # type: ignore[method-assign]  # wraps SB3's own update step, the one learn() calls


class UnwrapTrainAtEnd(BaseCallback):
    """Drop the timing wrapper before rl-zoo3 saves the model (SB3 would try to pickle the closure)."""

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        self.model.__dict__.pop("train", None)


def train_amp(config: AmpConfig, cache_dir: Path) -> AgentRef:
    """The agent trained for ``config`` (fp32 or autocast), timed per gradient update; reused from the cache."""
    folder = config.folder(cache_dir)
    ref = find_in_folder(folder, config.algo, config.env_id, "amp")
    if ref is not None:
        return ref
    clock = TrainClock()
    scales: list = []  # the fp16 loss scale, recorded after training

    def prepare(model: BaseAlgorithm, n_timesteps: int) -> list[BaseCallback]:
        if config.dtype != "fp32":
            scales.append(enable_mixed_precision(model, config.dtype))
        assert isinstance(model, OnPolicyAlgorithm | OffPolicyAlgorithm)  # every SB3 algorithm is one of them
        timed_train(model, clock)
        return [UnwrapTrainAtEnd()]

    # the fp32 agent trained beside this one (amp trains it first): the report pairs the two by its hash
    baseline = (
        None
        if config.dtype == "fp32"
        else find_in_folder(replace(config, dtype="fp32").folder(cache_dir), config.algo, config.env_id, "amp")
    )
    start = time.perf_counter()
    arch = POLICY_SIZES[config.arch]
    run_dir = train_with_callbacks(
        config.algo,
        config.env_id,
        folder,
        config.seed,
        config.n_timesteps,
        prepare,
        hyperparams={"policy_kwargs": f"dict(net_arch={arch})"},
        device=config.device,
    )
    record = asdict(config) | {
        "net_arch": arch,
        "wall_seconds": time.perf_counter() - start,
        "train_seconds": clock.seconds,
        "updates": clock.updates,
        "ms_per_update": 1000 * clock.seconds / max(clock.updates, 1),
        "torch_threads": torch.get_num_threads(),
        "device": config.device,
        "autocast": "forward passes only" if config.dtype != "fp32" else None,
        "loss_scale": asdict(scales[0]) if scales and scales[0] is not None else None,
        "fp32_agent_hash": baseline.content_hash if baseline is not None else None,
        "load": load_record(),
        "cpu": cpu_model(),
        "half_features": list(half_features()),  # bf16/fp16 arithmetic: without it autocast is slower, not faster
        "device_record": device_record(config.device),  # on cuda: the GPU, not this CPU's features
    }
    (run_dir / TRAINING_RECORD).write_text(json.dumps(record, indent=2))
    ref = find_in_folder(folder, config.algo, config.env_id, "amp")
    assert ref is not None
    return ref


@register(AmpConfig)
class AmpHandler(TrainedAgentEvaluation):
    """The agent trained with mixed precision (or the cache's), evaluated at fp32 (its one job per seed)."""

    def train(self, config: AmpConfig, cache: Path) -> AgentRef:
        return train_amp(config, cache)

    def specs(self, config: AmpConfig) -> list:
        return []
