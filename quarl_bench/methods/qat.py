"""QAT (handler of method ``qat``): train with fake-quantized acting weights after a quant delay, then evaluate really quantized."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from quarl_bench.errors import QuarlError
from quarl_bench.methods.agent_evaluation import TrainedAgentEvaluation
from quarl_bench.methods.protocol import register
from quarl_bench.types import AgentRef, QuantSpec
from quarl_bench.zoo.algorithms import check_algo

if TYPE_CHECKING:  # the config is read by the command line: training's modules load when a run trains
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.callbacks import BaseCallback

QAT_BITS = (2, 3, 4, 5, 6, 7, 8, 16)


@dataclass(frozen=True)
class QATConfig:
    """One QAT training run.

    :param precision: ``int2`` ... ``int8`` or ``int16`` (``fp16``/``bf16`` are accepted too).
    :param quant_delay: env steps before fake quantization switches on; None = half the training steps.
    :param n_timesteps: training budget; None = rl-zoo3's budget for the pair.
    :param seed: training seed (evaluation seeds are separate).
    :param quantize_activations: also fake-quantize the acting layers' outputs.
    """

    algo: str
    env_id: str
    precision: str
    quant_delay: int | None = None
    n_timesteps: int | None = None
    seed: int = 0
    quantize_activations: bool = False

    method: ClassVar[str] = "qat"

    def __post_init__(self) -> None:
        check_algo(self.algo)
        spec = QuantSpec(self.precision)
        object.__setattr__(self, "precision", spec.precision)
        if spec.number_format.is_int and spec.bits not in QAT_BITS:
            raise QuarlError(f"bad QAT bits {spec.bits}: expected one of {', '.join(map(str, QAT_BITS))}")
        if spec.is_identity:
            raise QuarlError("bad QAT precision 'fp32': expected a quantized precision (2-8, 16, fp16, bf16)")

    @classmethod
    def from_cell(cls, cell: Any) -> QATConfig:
        """One training run per grid cell: its seed is the training seed (evaluated on seed 0)."""
        return cls(cell.algo, cell.env_id, cell.precision, cell.quant_delay, cell.n_timesteps, cell.seed)

    def folder(self, cache_dir: Path) -> Path:
        delay = "half" if self.quant_delay is None else str(self.quant_delay)
        steps = "zoo" if self.n_timesteps is None else str(self.n_timesteps)
        acts = "-acts" if self.quantize_activations else ""
        return cache_dir / "qat" / f"{self.precision}{acts}-delay{delay}-steps{steps}-seed{self.seed}"


def train_qat(config: QATConfig, cache_dir: Path) -> AgentRef:
    """The QAT agent for ``config``, trained now unless an earlier run left it in the cache."""
    from quarl_bench.quant.qat import QATSwitch, QuantDelayCallback, prepare_qat
    from quarl_bench.store.provenance import TRAINING_RECORD
    from quarl_bench.zoo.agents import find_in_folder
    from quarl_bench.zoo.train import train_with_callbacks

    folder = config.folder(cache_dir)
    ref = find_in_folder(folder, config.algo, config.env_id, "qat")
    if ref is not None:
        return ref
    switch = QATSwitch(QuantSpec(config.precision), config.quantize_activations)
    record: dict[str, Any] = asdict(config)

    def prepare(model: BaseAlgorithm, n_timesteps: int) -> list[BaseCallback]:
        delay = config.quant_delay if config.quant_delay is not None else n_timesteps // 2
        record.update(training_steps=n_timesteps, quant_delay=delay, layers=prepare_qat(model.policy, switch))
        return [QuantDelayCallback(switch, delay)]

    run_dir = train_with_callbacks(
        config.algo,
        config.env_id,
        folder,
        config.seed,
        config.n_timesteps,
        prepare,
        {"quant_bits": config.precision, "quant_delay": config.quant_delay},
    )
    record["enabled_at_step"] = switch.enabled_at_step
    (run_dir / TRAINING_RECORD).write_text(json.dumps(record, indent=2))
    ref = find_in_folder(folder, config.algo, config.env_id, "qat")
    assert ref is not None, f"rl-zoo3 saved no agent in {run_dir}"
    return ref


def resolve_config(algo: str, env: str, bits: str, **kwargs: Any) -> QATConfig:
    from quarl_bench.zoo.envs import resolve_env_id

    return QATConfig(algo, resolve_env_id(env), bits, **kwargs)


@register(QATConfig)
class QATHandler(TrainedAgentEvaluation):
    """The agent QAT-trains (or the cache's), evaluated at its QAT precision next to its fp32 reference."""

    def train(self, config: QATConfig, cache: Path) -> AgentRef:
        return train_qat(config, cache)

    def found(self, work: Any) -> AgentRef | None:
        """The trained agent where an earlier run left it, else None (nothing is trained)."""
        from quarl_bench.zoo.agents import find_in_folder

        config = work.config
        return find_in_folder(config.folder(work.cache), config.algo, config.env_id, "qat")

    def specs(self, config: QATConfig) -> list[QuantSpec]:
        return [QuantSpec(config.precision)]
