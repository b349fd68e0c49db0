"""The short README written next to an exported artifact: inputs, outputs, how to run it with onnxruntime alone."""

from __future__ import annotations

from gymnasium import spaces

from quarl_bench.agent_names import ref_title
from quarl_bench.deploy.backends import Artifact
from quarl_bench.types import AgentRef, QuantSpec


def artifact_readme(
    artifact: Artifact, ref: AgentRef, module, observation_space: spaces.Box, filename: str, spec: QuantSpec
) -> str:
    """Markdown describing the artifact's input and output and a runnable onnxruntime snippet."""
    shape = ", ".join(["batch", *map(str, observation_space.shape)])
    dtype = "uint8" if module.image else "float32"
    if module.discrete:
        output = f"`action`: int64 [batch], the greedy action in 0..{module.policy.action_space.n - 1}"
    else:
        output = f"`action`: float32 [batch, {module.policy.action_space.shape[0]}], already within the env's bounds"
    inside = ["deterministic action selection"]
    if module.normalize:
        inside.insert(0, "the agent's VecNormalize observation statistics (with clipping)")
    if module.image:
        inside.insert(0, "channel-last uint8 frames transposed and scaled to [0, 1]")
    calibration = (
        f"; activation ranges calibrated on {spec.calibration_states} visited observations ({spec.calibration_method})"
        if spec.calibration_states
        else ""
    )
    run = (
        (
            "import numpy as np\nimport onnxruntime as ort\n\n"
            f'session = ort.InferenceSession("{filename}", providers=["CPUExecutionProvider"])\n'
            f"obs = np.zeros(({', '.join(['1', *map(str, observation_space.shape)])}), dtype=np.{dtype})  # a raw env observation\n"
            'action = session.run(None, {"obs": obs})[0][0]\n'
        )
        if artifact.kind == "onnx"
        else (
            f'import torch\n\npolicy = torch.jit.load("{filename}")\naction = policy(torch.zeros(1, {", ".join(map(str, observation_space.shape))}))[0]\n'
        )
    )
    return (
        f"# {filename}: {ref.algo} {ref.env_id}, backend {artifact.backend}\n\n"
        f"Made by quarl-bench from {ref_title(ref)}, at `{ref.model_path or ref.run_dir}` (content sha256 "
        f"{ref.content_hash}); artifact sha256 "
        f"{artifact.sha256}, {artifact.nbytes} bytes{calibration}.\n\n"
        f"- Input `obs`: {dtype} [{shape}], the env's raw observation (what `env.step` returns; for Atari the "
        "AtariWrapper's frame stack).\n"
        f"- Output {output}.\n"
        f"- Inside the graph: {', '.join(inside)}.\n\n"
        f"```python\n{run}```\n"
    )
