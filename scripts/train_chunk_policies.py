"""Make the two robot-policy shapes on a goal task from an expert quarl-bench already has: demonstrations from the
expert (deterministic, seeded resets), then an ACT-style chunking transformer (L1 on chunks) and a state-based
Diffusion Policy (DDPM noise objective, DDIM at inference) trained on them on the CPU.

    python scripts/train_chunk_policies.py --expert results/agents/tqc/PandaReach-v3_1/PandaReach-v3.zip \
        --env PandaReach-v3 --out results/agents/chunked/PandaReach-v3_1

writes ``act.pt``, ``diffusion.pt`` and ``policy.py`` (factories ``act`` and ``diffusion`` for ``--policy-module``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from quarl_bench.training import chunk_models

POLICY_PY = '''"""Chunk policies trained by scripts/train_chunk_policies.py: --policy-module policy.py:act (or :diffusion)."""

from pathlib import Path

from quarl_bench.training.chunk_models import load

HERE = Path(__file__).parent


def act():
    return load(HERE / "act.pt")


def diffusion():
    return load(HERE / "diffusion.pt")
'''


def flat(observation: dict | np.ndarray, space: gym.Space) -> np.ndarray:
    if isinstance(space, gym.spaces.Dict):
        return np.concatenate([np.asarray(observation[key], np.float32).reshape(-1) for key in space.spaces])
    return np.asarray(observation, np.float32).reshape(-1)


def expert_actor(expert_zip: Path, env_id: str):
    """The expert's deterministic action for one raw observation (its rl-zoo3 VecNormalize statistics applied)."""
    from sb3_contrib import TQC
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    import quarl_bench.zoo.robotics  # noqa: F401  (registers the Fetch ids)

    if env_id.startswith("Panda"):
        import panda_gym  # noqa: F401
    env = gym.make(env_id)
    expert = TQC.load(expert_zip, env=env, device="cpu")  # HER's replay buffer is built on the env
    statistics = expert_zip.with_suffix("") / "vecnormalize.pkl"  # rl-zoo3's `normalize: True` agents
    normaliser = None
    if statistics.exists():
        normaliser = VecNormalize.load(str(statistics), DummyVecEnv([lambda: gym.make(env_id)]))
        normaliser.training = False
    return lambda observation: expert.predict(
        normaliser.normalize_obs(observation) if normaliser else observation, deterministic=True
    )[0]


def demonstrations(act, env_id: str, episodes: int, seed: int) -> tuple[list, list, float]:
    """Per episode (reset seeds ``seed``, ``seed + 1``, ...): flat observations and the expert's actions; and the
    expert's success rate."""
    env = gym.make(env_id)
    observations, actions, successes = [], [], 0
    for episode in range(episodes):
        observation, _ = env.reset(seed=seed + episode)
        seen, done, info = [], [], {}
        truncated = terminated = False
        while not (truncated or terminated):
            action = act(observation)
            seen.append(flat(observation, env.observation_space))
            done.append(np.asarray(action, np.float32))
            observation, _, terminated, truncated, info = env.step(action)
        successes += bool(info.get("is_success", False))
        observations.append(np.stack(seen))
        actions.append(np.stack(done))
    return observations, actions, successes / episodes


def chunk_targets(observations: list, actions: list, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(obs, the next ``size`` actions) for every step; past the episode's end, its last action repeated."""
    xs, ys = [], []
    for seen, done in zip(observations, actions, strict=True):
        padded = np.concatenate([done, np.repeat(done[-1:], size, axis=0)])
        xs.append(seen)
        ys.append(np.stack([padded[t : t + size] for t in range(len(done))]))
    return torch.as_tensor(np.concatenate(xs)), torch.as_tensor(np.concatenate(ys))


def fit(module, loss_of, data: tuple, steps: int, seed: int) -> float:
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.AdamW(module.parameters(), lr=1e-3, weight_decay=1e-6)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps)
    observations, chunks = data
    for _ in range(steps):
        batch = torch.randint(len(observations), (256,), generator=generator)
        loss = loss_of(module, observations[batch], chunks[batch], generator)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
    return float(loss.detach())


def l1_loss(module, observation, chunk, generator) -> torch.Tensor:
    return (module(observation) - chunk).abs().mean()


def noise_loss(scheduler):
    def loss(module, observation, chunk, generator) -> torch.Tensor:
        noise = torch.randn(chunk.shape, generator=generator)
        timestep = torch.randint(scheduler.config.num_train_timesteps, (len(chunk),), generator=generator)
        noisy = scheduler.add_noise(chunk, noise, timestep)
        return ((module(noisy, timestep, observation) - noise) ** 2).mean()

    return loss


def train(act, env_id: str, out: Path, episodes: int, size: int, execute: int, steps: int, seed: int) -> None:
    """Demonstrations from ``act``, both models trained on them, written to ``out`` with their ``policy.py``."""
    from quarl_bench.zoo.devices import one_torch_thread

    one_torch_thread()  # small models: one thread is fastest here
    torch.manual_seed(0)
    started = time.monotonic()
    observations, actions, expert_success = demonstrations(act, env_id, episodes, seed)
    data = chunk_targets(observations, actions, size)
    print(f"{len(data[0])} demonstration steps from {episodes} episodes; expert success {expert_success:.2f}")
    mean, std = data[0].mean(0), data[0].std(0).clamp_min(1e-3)
    out.mkdir(parents=True, exist_ok=True)
    obs_dim, action_dim = data[0].shape[1], data[1].shape[2]
    act_model = chunk_models.ChunkTransformer(obs_dim, action_dim, size, execute)
    diffusion = chunk_models.ChunkDenoiser(obs_dim, action_dim, size, execute)
    from quarl_bench.zoo.denoising import DenoisingShape

    scheduler = DenoisingShape.declared(diffusion.denoising, "ChunkDenoiser").make_scheduler()
    for kind, module, loss in (("act", act_model, l1_loss), ("diffusion", diffusion, noise_loss(scheduler))):
        module.obs_mean.copy_(mean)
        module.obs_std.copy_(std)
        began = time.monotonic()
        final = fit(module, loss, data, steps, seed=1)
        chunk_models.save(module.eval(), kind, out / f"{kind}.pt")
        print(f"{kind}: {steps} steps, final loss {final:.4f}, {time.monotonic() - began:.0f} s")
    (out / "policy.py").write_text(POLICY_PY)
    print(f"wrote {out}/act.pt, diffusion.pt, policy.py in {time.monotonic() - started:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expert", type=Path, required=True)
    parser.add_argument("--env", default="PandaReach-v3")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--size", type=int, default=4)
    parser.add_argument("--execute", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4000, help="gradient steps per model")
    parser.add_argument("--seed", type=int, default=10_000, help="first demonstration reset seed")
    args = parser.parse_args()
    act = expert_actor(args.expert, args.env)
    train(act, args.env, args.out, args.episodes, args.size, args.execute, args.steps, args.seed)


if __name__ == "__main__":
    main()
