"""Fine-tuning with the RL algorithm's own loss (recipes ``sam``, ``noise``, ``sam+noise``): rl-zoo3 builds the
algorithm, its envs and hyperparameters as for training (the parent's saved ``config.yml`` where it has one); the
parent's weights and normalisation statistics are loaded into it before the first step, and it learns for the
budget's env steps.

Fine-tuning a trained agent is not training from scratch, so four hyperparameters change: exploration starts at
its final rate (DQN, QR-DQN), learning starts after at most a tenth of the budget (the replay buffer starts empty),
the learning rate is the recipe's ``learning_rate_scale`` times the zoo's (default 0.01: with SAM at the zoo's own
rate dqn CartPole fell from 500 to 151 in 5000 steps, at a tenth of it to 127, and the study certified the
hardened fp32 of dqn CartPole, dqn MountainCar and qrdqn MountainCar worse than their parents'; at a hundredth it
kept 500), and the parent's observation statistics stay frozen (the hardened agent normalises as the parent did).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.vec_env import VecNormalize, unwrap_vec_normalize

from quarl_bench.training.harden.distill import FineTune
from quarl_bench.training.harden.recipes import Recipe
from quarl_bench.training.harden.student import convert, release, target_switch
from quarl_bench.training.sam import AlternatingSAM
from quarl_bench.types import QuantSpec
from quarl_bench.zoo.algorithms import EPSILON_GREEDY
from quarl_bench.zoo.model_file import saved_config
from quarl_bench.zoo.train import train_with_callbacks


def fine_tune_hyperparams(algo: str, config: dict[str, Any], budget: int, rate_scale: float) -> dict[str, Any]:
    """The parent's hyperparameters with the fine-tuning changes of the module docstring."""
    changed = {k: v for k, v in config.items() if k != "n_timesteps"}
    if "learning_starts" in changed or algo in EPSILON_GREEDY:
        changed["learning_starts"] = min(int(changed.get("learning_starts", budget)), budget // 10)
    if "learning_rate" in changed:
        changed["learning_rate"] = _scaled_rate(changed["learning_rate"], rate_scale)
    if algo in EPSILON_GREEDY:
        final = float(changed.get("exploration_final_eps", 0.05))
        changed["exploration_initial_eps"] = final
        changed["exploration_final_eps"] = final
    return changed


def _scaled_rate(rate: Any, scale: float) -> Any:
    """rl-zoo3's learning rate (a number, or ``lin_X`` for a linear schedule) times ``scale``."""
    if isinstance(rate, str) and rate.startswith("lin_"):
        return f"lin_{float(rate[4:]) * scale:g}"
    return float(rate) * scale


class _Harden(BaseCallback):
    """Loads the parent into the fresh model, then applies the recipe for the run, and undoes it at the end."""

    def __init__(self, parent: Any, spec: QuantSpec, recipe: Recipe) -> None:
        super().__init__()
        self.source, self.spec, self.recipe = parent, spec, recipe
        self.sams: list[AlternatingSAM] = []
        self.holders: list[Any] = []

    def _on_training_start(self) -> None:
        model = self.model
        assert isinstance(model, OnPolicyAlgorithm | OffPolicyAlgorithm)  # every SB3 algorithm is one of them
        model.policy.load_state_dict(self.source.model.policy.state_dict())
        learned = getattr(self.source.model, "log_ent_coef", None)  # SAC/TQC's learned entropy coefficient
        own = getattr(model, "log_ent_coef", None)
        if isinstance(learned, torch.Tensor) and isinstance(own, torch.Tensor):
            with torch.no_grad():
                own.copy_(learned)
        _freeze_parent_statistics(model, self.source)
        noise = self.recipe.part("noise")
        if noise:
            convert(model.policy, target_switch(self.spec, noise.scale))
        sam = self.recipe.part("sam")
        if sam:
            holder: Any  # an SB3 network that carries its optimizer as an attribute (actor, critic, policy)
            for holder in model.policy.modules():
                optimizer = getattr(holder, "optimizer", None)
                if isinstance(optimizer, torch.optim.Optimizer) and not isinstance(optimizer, AlternatingSAM):
                    wrapped_optimizer = AlternatingSAM(optimizer, sam.rho)
                    holder.optimizer = wrapped_optimizer
                    self.sams.append(wrapped_optimizer)
                    self.holders.append(holder)
            learn_step = model.train

            def train(*args: Any, **kwargs: Any) -> None:
                for wrapped in self.sams:
                    wrapped.resume()
                try:
                    learn_step(*args, **kwargs)
                finally:
                    for wrapped in self.sams:
                        wrapped.hold()

            model.train = train  # type: ignore[method-assign]  # wraps SB3's own update step, the one learn() calls

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        model: BaseAlgorithm = self.model
        for holder, wrapped in zip(self.holders, self.sams, strict=True):
            wrapped.hold()
            holder.optimizer = wrapped.base
        model.__dict__.pop("train", None)
        release(model.policy)

    @property
    def sam_updates(self) -> int:
        return sum(wrapped.updates for wrapped in self.sams)


def _freeze_parent_statistics(model: BaseAlgorithm, parent: Any) -> None:
    env = model.get_env()
    normalizer = unwrap_vec_normalize(env) if env is not None else None
    if normalizer is None or not parent.stats_path:
        return
    stats = Path(parent.stats_path) / "vecnormalize.pkl"
    if stats.is_file():
        from quarl_bench.zoo.envs import gym_pickle_alias

        with gym_pickle_alias():
            saved = VecNormalize.load(str(stats), normalizer.venv)
        normalizer.obs_rms, normalizer.ret_rms = saved.obs_rms, saved.ret_rms
    normalizer.training = False


def rl_fine_tune(parent: Any, spec: QuantSpec, recipe: Recipe, budget: int, seed: int, zip_path: Path) -> FineTune:
    """Fine-tune ``parent`` (a loaded agent) with its algorithm's loss for ``budget`` env steps; the model is saved
    to ``zip_path``.

    :raises QuarlError: when rl-zoo3 has no hyperparameters for the agent's algo and env.
    """
    ref = parent.ref
    stats_folder = Path(parent.stats_path) if parent.stats_path else Path()
    rate_scale = min(part.learning_rate_scale for part in recipe.parts)  # sam, noise: the RL loss's parts
    from quarl_bench.config import zoo_hyperparameters

    saved = (saved_config(stats_folder) if parent.stats_path else {}) or zoo_hyperparameters(ref.algo, ref.env_id)
    hyperparams = fine_tune_hyperparams(ref.algo, saved, budget, rate_scale)
    # the parent's own network (a user's zip need not have the zoo's), as the loaded model holds it
    hyperparams["policy_kwargs"] = dict(getattr(parent.model, "policy_kwargs", {}) or {})
    callback = _Harden(parent, spec, recipe)
    started = time.perf_counter()
    trained: dict[str, Any] = {}

    def prepare(model: BaseAlgorithm, _n: int) -> list[BaseCallback]:
        trained["model"] = model
        return [callback]

    with tempfile.TemporaryDirectory(prefix="harden-") as scratch:
        train_with_callbacks(
            ref.algo, ref.env_id, Path(scratch), seed, budget, prepare, hyperparams=hyperparams or None
        )
    model: BaseAlgorithm = trained["model"]
    seconds = time.perf_counter() - started
    model.save(zip_path)
    updates = int(getattr(model, "_n_updates", 0))
    return FineTune(int(model.num_timesteps), callback.sam_updates or updates, seconds, float("nan"))
