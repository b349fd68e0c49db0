"""Running a recurrent policy's artifact (ppo_lstm; built from
:class:`~quarl_bench.deploy.export.RecurrentDeployablePolicy`): ``(obs, h, c) -> (action, h_out, c_out)``, the
actor's LSTM state passed in and out so the caller carries it, zeroed at every episode start.

Only backends that can carry the state take one: ONNX (``ort-fp32``, ``ort-fp16``) and TorchScript (``torch-fp32``);
the others refuse in one line. Where quarl-bench runs an artifact on states it did not reach itself (the parity
gate's fixed states, timing), it passes Markov states ``[raw obs | h | c]``; :class:`RecurrentRunner` splits them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from quarl_bench.errors import QuarlError
from quarl_bench.families.recurrent import split


def refuse_stateless(backend: str, carries_state: bool) -> None:
    """:raises QuarlError: when ``backend`` cannot carry a recurrent policy's state."""
    from quarl_bench.deploy.targets import BACKENDS

    if not carries_state:
        able = ", ".join(BACKENDS.names(carries_state=True))
        raise QuarlError(
            f"backend {backend} cannot carry a recurrent policy's LSTM state: expected one of {able} "
            "(state inputs and outputs)"
        )


class RecurrentRunner:
    """A recurrent artifact run from Python: ``step(obs, state) -> (actions, state)`` along episodes, and, called on
    a batch, the actions from Markov states ``[raw obs | h | c]`` (or from a zero state for plain observations)."""

    def __init__(self, run: Callable[..., tuple[np.ndarray, ...]], obs_dim: int, layers: int, hidden: int) -> None:
        self.run, self.obs_dim, self.layers, self.hidden = run, obs_dim, layers, hidden

    def zero_state(self, envs: int) -> tuple[np.ndarray, np.ndarray]:
        zeros = np.zeros((self.layers, envs, self.hidden), dtype=np.float32)
        return zeros, zeros.copy()

    def step(self, obs: np.ndarray, state: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, tuple]:
        action, h, c = self.run(np.asarray(obs, dtype=np.float32), *state)
        return action, (np.asarray(h), np.asarray(c))

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        batch = np.asarray(batch, dtype=np.float32)
        rows = len(batch)
        flat = batch.reshape(rows, -1)
        if flat.shape[1] == self.obs_dim:
            return self.step(flat, self.zero_state(rows))[0]
        return self.step(*split(flat, self.layers, self.hidden))[0]


def recurrent_runner(artifact: Any, threads: int) -> RecurrentRunner:
    """The :class:`RecurrentRunner` of an ONNX or TorchScript recurrent artifact."""
    info = artifact.info("recurrent")
    if artifact.kind == "onnx":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        session = ort.InferenceSession(artifact.data, options, providers=["CPUExecutionProvider"])

        def run(obs: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, ...]:
            return tuple(session.run(None, {"obs": obs, "h": h, "c": c}))

    else:
        import io

        module = torch.jit.load(io.BytesIO(artifact.data)).eval()

        def run(obs: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, ...]:
            with torch.inference_mode():
                return tuple(t.numpy() for t in module(*(torch.as_tensor(x) for x in (obs, h, c))))

    return RecurrentRunner(run, info["obs_dim"], info["layers"], info["hidden"])
