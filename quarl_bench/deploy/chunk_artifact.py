"""A chunk policy's artifact (ACT-shaped, :mod:`quarl_bench.zoo.chunked`; Diffusion-Policy-shaped,
:mod:`quarl_bench.zoo.denoising`): its module as an ONNX graph (``policy.onnx``: the chunker, or the denoiser alone),
the loop as ``runtime.py`` (:mod:`quarl_bench.deploy.chunk_runtime`, copied: numpy and ONNX Runtime only), and
``chunk.json``, the sidecar it reads (the chunk's shape, the scheduler's tables, the normalisation statistics).

The artifact's identity is the bytes of all three. In quarl-bench's process the same runtime plays it, the noise
of each chunk drawn as the torch policy draws it (:func:`torch_noise`), so that the parity gate and the closed loop
compare the artifact with its claim on the same noise.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from quarl_bench.deploy.export import TorchForm, traced_onnx
from quarl_bench.errors import QuarlError
from quarl_bench.observation_layout import layout_of
from quarl_bench.zoo.denoising import DenoisingShape, chunk_generator

BACKENDS = ("ort-fp32", "ort-fp16", "ort-int8-dynamic")  # the runtime plays an ONNX graph; nothing calibrates it
SIDECAR_FORMAT = 1
RUNTIME = Path(__file__).with_name("chunk_runtime.py")


class ChunkForm(TorchForm):
    """The deployable form of a chunk policy: ``forward`` is its module (what ``policy.onnx`` holds), the loop
    lives in the sidecar and runtime (:meth:`packaged`)."""

    carries_state = False  # the graph carries none: runtime.py carries the chunk state
    discrete, image, normalize = False, False, False
    low: torch.Tensor
    high: torch.Tensor

    def __init__(self, policy: Any, observation_space: spaces.Space, normalizer: Any = None) -> None:
        super().__init__()
        if normalizer is not None and getattr(normalizer, "norm_obs", False):
            raise QuarlError(
                "cannot export a chunk policy behind VecNormalize statistics: expected a module that normalises "
                "its own observations (its sidecar's statistics are then the identity)"
            )
        self.policy, self.chunk = policy, policy.chunk
        self.denoising = isinstance(policy.chunk, DenoisingShape)
        self.layout = layout_of(observation_space)
        self.obs_dim = self.layout.size if self.layout else int(np.prod(observation_space.shape or ()))
        box = policy.action_space
        self.register_buffer("low", torch.as_tensor(box.low.reshape(-1), dtype=torch.float32))
        self.register_buffer("high", torch.as_tensor(box.high.reshape(-1), dtype=torch.float32))
        self.module = policy.module

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.module(*inputs)

    def raw_states(self, states: np.ndarray) -> np.ndarray:
        return np.asarray(states, np.float32).reshape(len(states), -1)

    def example(self, sample: np.ndarray) -> tuple[torch.Tensor, ...]:
        obs = torch.as_tensor(self.raw_states(sample[:1]))
        if not self.denoising:
            return (obs,)
        return torch.zeros(1, self.chunk.size, self.policy.action_dim), torch.zeros(1, dtype=torch.int64), obs

    def onnx(self, sample: np.ndarray) -> bytes:
        """The chunker ``obs -> chunk``, or the denoiser ``(sample, timestep, obs) -> prediction``."""
        inputs = ["sample", "timestep", "obs"] if self.denoising else ["obs"]
        output = "prediction" if self.denoising else "chunk"
        axes = {name: {0: "batch"} for name in (*inputs, output)}
        return traced_onnx(self, self.example(sample), inputs, [output], axes)

    def sidecar(self) -> dict[str, Any]:
        """``chunk.json``: what runtime.py needs besides the graph."""
        box = self.policy.action_space
        found: dict[str, Any] = {
            "format": SIDECAR_FORMAT,
            "shape": "denoising" if self.denoising else "chunked",
            "label": self.chunk.label(),
            "size": self.chunk.size,
            "execute": self.chunk.execute,
            "ensemble": self.chunk.ensemble,
            "action_dim": self.policy.action_dim,
            "action_low": box.low.reshape(-1).tolist(),
            "action_high": box.high.reshape(-1).tolist(),
            "observation_dim": self.obs_dim,
            "observation_keys": self.layout.as_json() if self.layout else None,
            "normalization": {
                "observation": {
                    "mean": [0.0] * self.obs_dim,
                    "std": [1.0] * self.obs_dim,
                    "applied": "by the runtime before the graph, (obs - mean) / std; the identity here: the "
                    "exported module normalises its own observations",
                }
            },
        }
        if self.denoising:
            found["denoising"] = scheduler_tables(self.chunk, self.policy.scheduler)
        return found

    @staticmethod
    def claim(backend: str, spec: Any) -> Any:
        """What the artifact claims to be: ``ort-int8-dynamic``'s claim with each layer's input on the grid of its
        own range per call (``dynamic``), as ORT quantizes it: over a denoising loop or a transformer's layers the
        rounding of activations compounds, and a weight-only claim would gate the artifact against another policy."""
        if backend != "ort-int8-dynamic":
            return spec
        return dataclasses.replace(spec, act_bits="int8", calibration_method="dynamic", calibration_states=1)

    @staticmethod
    def refuse_backend(backend: str) -> None:
        """:raises QuarlError: for a backend whose artifact cannot sit beside the runtime (before it is built)."""
        if backend not in BACKENDS:
            raise QuarlError(
                f"backend {backend} cannot play a chunk policy: its loop runs in runtime.py beside an ONNX graph "
                f"that nothing calibrates; expected one of {', '.join(BACKENDS)}"
            )

    def packaged(self, artifact: Any) -> Any:
        """``artifact`` (its graph built by an ONNX backend) with the sidecar and the runtime beside it."""
        sidecar = self.sidecar()
        files = (
            ("policy.onnx", artifact.data),
            ("chunk.json", (json.dumps(sidecar, indent=1) + "\n").encode()),
            ("runtime.py", RUNTIME.read_bytes()),
        )
        return dataclasses.replace(artifact, files=files, meta=(*artifact.meta, ("chunk", sidecar)))


def scheduler_tables(shape: DenoisingShape, scheduler: Any) -> dict[str, Any]:
    """The scheduler as numbers: its timesteps, each one's predecessor, the cumulative alphas (diffusers')."""
    timesteps = [int(t) for t in scheduler.timesteps]
    if shape.scheduler == "ddim":
        previous = [t - shape.train_steps // shape.steps for t in timesteps]
        final = float(scheduler.final_alpha_cumprod)
    else:  # DDPM's predecessor is the next timestep run, and 1 past the last
        previous, final = [*timesteps[1:], -1], 1.0
    return {
        "scheduler": shape.scheduler,
        "steps": shape.steps,
        "train_steps": shape.train_steps,
        "prediction": shape.prediction,
        "beta_schedule": shape.beta_schedule,
        "clip_sample": 1.0,
        "timesteps": timesteps,
        "previous_timesteps": previous,
        "alphas_cumprod": [float(a) for a in scheduler.alphas_cumprod],
        "final_alpha_cumprod": final,
        "noise": "each chunk's initial sample, then (DDPM) one draw per step with timestep > 0, standard normal; "
        "numpy's default_rng([episode seed, chunk number]) unless the caller gives its own",
    }


def torch_noise(sidecar: dict[str, Any]) -> Any:
    """``(seed, call) -> (initial, per-step noise)`` as :class:`~quarl_bench.zoo.denoising.DenoisingModulePolicy`
    draws them (its torch generator of the episode's chunk)."""
    shape = (int(sidecar["size"]), int(sidecar["action_dim"]))
    loop = sidecar.get("denoising") or {"scheduler": "ddim", "timesteps": []}
    drawing = [loop["scheduler"] == "ddpm" and t > 0 for t in loop["timesteps"]]

    def noise(seed: int, call: int) -> tuple[np.ndarray, np.ndarray]:
        generator = chunk_generator(seed, call)
        initial = torch.randn(shape, generator=generator)
        steps = [torch.randn((1, *shape), generator=generator)[0] if d else torch.zeros(shape) for d in drawing]
        return initial.numpy(), (torch.stack(steps) if steps else torch.zeros((0, *shape))).numpy()

    return noise


class ChunkRunner:
    """A chunk artifact in quarl-bench's process: ``step``/``zero_state``/``started`` along episodes, and, called
    on a batch, each observation's action from a fresh state (what the parity gate and timing measure)."""

    def __init__(self, artifact: Any, threads: int = 1) -> None:
        from quarl_bench.deploy.chunk_runtime import ChunkRuntime

        sidecar = artifact.info("chunk")
        self.runtime = ChunkRuntime(dict(artifact.files)["policy.onnx"], sidecar, threads, torch_noise(sidecar))
        self.started = self.runtime.started

    def zero_state(self, envs: int) -> tuple[np.ndarray, ...]:
        return self.runtime.zero_state(envs)

    def step(self, obs: np.ndarray, state: tuple[np.ndarray, ...]) -> tuple[np.ndarray, tuple]:
        return self.runtime.step(obs, state)

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        return self.runtime.first_actions(batch)

    def noise_of(self, observations: np.ndarray) -> np.ndarray | None:
        """Each fresh observation's chunk noise (initial, then per step) as one array, for ``vectors.npz``."""
        if self.runtime.shape != "denoising":
            return None
        from quarl_bench.deploy.chunk_runtime import episode_seed

        rows = np.asarray(observations, np.float32).reshape(len(observations), -1)
        drawn = [self.runtime.noise(episode_seed(row), 0) for row in rows]
        return np.stack([np.concatenate([initial[None], steps]) for initial, steps in drawn])


CLIENT = """\
sys.path.insert(0, ".")  # runtime.py lies in this folder, beside policy.onnx
from runtime import ChunkRuntime

runtime = ChunkRuntime("policy.onnx", json.load(open("chunk.json")))  # the chunk loop: open loop, ensemble, denoising
state = runtime.zero_state(1)  # what an episode starts from (zero it again at the next episode's start)


def act(obs):
    global state
    action, state = runtime.step(np.asarray(obs, dtype=np.float32)[None], state)
    return action[0]
"""
CHECK_CLIENT = """\
sys.path.insert(0, ".")  # runtime.py lies in this folder, beside policy.onnx
from runtime import ChunkRuntime

runtime = ChunkRuntime("policy.onnx", json.load(open("chunk.json")))
recorded = np.load("vectors.npz")
noise = iter(recorded["noise"]) if "noise" in recorded.files else None  # each vector's chunk noise, as at export


def act(obs):  # the vector's action from a fresh state: its chunk's first, denoised from the recorded noise
    drawn = None if noise is None else next(noise)
    given = None if drawn is None else [(drawn[0], drawn[1:])]
    return runtime.first_actions(np.asarray(obs, dtype=np.float32)[None], given)[0]
"""
