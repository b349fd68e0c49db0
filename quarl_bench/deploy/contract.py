"""The policy contract (``policy.json``) and README of an artifact folder: what goes in, what comes out, what was
checked, and a plain client (gymnasium plus the runtime, no quarl-bench) that plays it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from quarl_bench.deploy.backends import Artifact
from quarl_bench.types import AgentRef, DeployTarget, QuantSpec, spec_identity

CONTRACT_VERSION = 1

PREPARE = """\
observation = contract["observation"]
statistics = None if observation["normalization_inside"] else observation.get("normalization")


def prepare(obs):  # a Dict's keys concatenated in the recorded order; VecNormalize's statistics, where left to us
    if isinstance(obs, dict):
        obs = np.concatenate([np.asarray(obs[key["name"]], np.float32).reshape(-1) for key in observation["keys"]])
    if statistics is None:
        return obs
    x = (np.asarray(obs, dtype=np.float32) - np.float32(statistics["mean"])) * np.float32(statistics["scale"])
    return np.clip(x, -statistics["clip"], statistics["clip"])
"""

PLAY = (
    PREPARE
    + """

env = gym.make(contract["env_id"], **contract["env_kwargs"])
obs, _ = env.reset(seed=0)
total, done = 0.0, False
while not done:
    obs, reward, terminated, truncated, _ = env.step(act(prepare(obs)))
    total, done = total + float(reward), terminated or truncated
print(f"return {total:.1f}")
"""
)


def client(kind: str, recurrent: bool = False, chunk: bool = False) -> str:
    """A plain client for an artifact of ``kind``, run in the artifact folder: one seeded episode, its return (a
    recurrent artifact's client carries the state; a chunk artifact's plays its runtime's loop)."""
    head = "import json\nimport sys\n\nimport gymnasium as gym\nimport numpy as np\n\n"
    head += 'contract = json.load(open("policy.json"))\n'
    head += 'sys.path[:0] = contract.get("env_module_folders", [])  # where the env\'s own modules were found\n'
    from quarl_bench.deploy.chunk_artifact import CLIENT as CHUNK_CLIENT
    from quarl_bench.deploy.targets import KINDS

    entry = KINDS.get(kind)
    acting = CHUNK_CLIENT if chunk else entry.recurrent_client if recurrent else entry.client
    return head + acting + "\n\n" + PLAY


def contract(
    artifact: Artifact,
    ref: AgentRef,
    module,
    target: DeployTarget,
    claimed: QuantSpec,
    parity: dict[str, Any],
    allowed_divergent: bool,
    certification: dict[str, Any] | None,
    cortex_m4: dict[str, Any] | None,
    claimed_text: str = "",
) -> dict[str, Any]:
    """``policy.json``'s content (``claimed_text``: the claimed spec in words)."""
    policy = module.policy
    action_space = policy.action_space
    normalizes = bool(getattr(module, "normalize", False))
    outside = artifact.info("normalization") is not None
    from quarl_bench.zoo.observation_names import ACTIONS, OBSERVATIONS, named

    layout = getattr(module, "layout", None)
    features = layout.size if layout is not None else int(np.prod(policy.observation_space.shape))
    names = layout.features() if layout is not None else named(OBSERVATIONS, ref.env_id, features, "obs")
    observation: dict[str, Any] = {
        "shape": [features] if layout is not None else list(policy.observation_space.shape),
        "features": names if features <= 512 else [],
        "dtype": "uint8" if getattr(module, "image", False) else "float32",
        "normalization_inside": normalizes and not outside,
    }
    if layout is not None:  # a Dict observation: its keys, concatenated in this order into the one input
        observation["keys"] = layout.as_json()
        observation["flattening"] = "concatenate each key's values, row-major, in the order of keys"
    if normalizes:
        observation["normalization"] = {
            "mean": module.obs_mean.tolist(),
            "scale": module.obs_scale.tolist(),
            "clip": module.clip_obs,
            "applied": "inside the artifact"
            if not outside
            else "by the client, before the artifact: clip((obs - mean) * scale, -clip, clip)",
        }
    action: dict[str, Any]
    if module.discrete:
        action = {"space": "Discrete", "n": int(action_space.n), "dim": 0, "mapping": "argmax"}
        action["meaning"] = named(ACTIONS, ref.env_id, 1, "action")[0]
    else:
        squashed = getattr(module, "family", "") == "actor" or getattr(policy, "squash_output", False)
        action = {
            "space": "Box",
            "dim": int(np.prod(action_space.shape)),
            "low": np.asarray(action_space.low).reshape(-1).tolist(),
            "high": np.asarray(action_space.high).reshape(-1).tolist(),
            "mapping": "unscale [-1, 1] to [low, high]" if squashed else "clip to [low, high]",
        }
        action["features"] = named(ACTIONS, ref.env_id, action["dim"], "action")
    files = {name: hashlib.sha256(data).hexdigest() for name, data in artifact.named_files().items()}
    found = {
        "contract_version": CONTRACT_VERSION,
        "backend": artifact.backend,
        # gymnasium imports ``module:`` before making the env, as --env my_pkg:MyEnv-v0 did
        "env_id": ":".join([*(ref.env_packages[:1] or rl_zoo3_registered(ref.env_id)), ref.env_id]),
        "env_kwargs": json.loads(ref.env_kwargs) if ref.env_kwargs else {},
        "env_module_folders": module_folders(ref.env_packages),
        "files": files,
        "observation": observation,
        "action": action,
        "precision": target.spec.precision,
        "claimed_spec": spec_identity(claimed),
        "quantization": quantization(artifact, claimed, claimed_text),
        "source": {
            "algo": ref.algo,
            "env_id": ref.env_id,
            "agent_hash": ref.content_hash,
            "agent_path": str(ref.model_path or ref.run_dir or ""),
            "deploy_spec": spec_identity(target.spec, "deploy", target),
        },
        "parity": parity | {"allowed_divergent": allowed_divergent},
        "certification": certification,
    }
    if cortex_m4 is not None:
        found["cortex_m4"] = cortex_m4
    chunk = artifact.info("chunk")
    if chunk is not None:  # the loop around the graph: chunk.json, which runtime.py reads
        found["chunk"] = chunk
        found["action"]["mapping"] = (
            "runtime.py: the denoised chunk mapped from [-1, 1] onto [low, high], executed open-loop"
            if chunk["shape"] == "denoising"
            else "runtime.py: the chunk executed open-loop or ensembled, clipped to [low, high]"
        )
    state = artifact.info("recurrent")
    if state is not None:
        found["state"] = {
            "inputs": ["h", "c"],
            "outputs": ["h_out", "c_out"],
            "layers": state["layers"],
            "hidden": state["hidden"],
            "shape": "(layers, batch, hidden)",
            "reset": "zeros at every episode start; otherwise pass h_out, c_out back as the next step's h, c",
        }
    return found


def rl_zoo3_registered(env_id: str) -> list[str]:
    """The module gymnasium must import before it can make ``env_id``: ``rl_zoo3.import_envs`` for an env that
    rl-zoo3 registers itself (CartPoleNoVel-v1, ...), the top package of an env another package registers
    (``panda_gym``, ``pybullet_envs_gymnasium``, ``ale_py``), [] for gymnasium's own."""
    import gymnasium as gym

    try:
        entry = gym.spec(env_id).entry_point
    except gym.error.Error:
        return []
    module = entry.__module__ if callable(entry) else str(entry).partition(":")[0]
    if module.startswith("rl_zoo3."):
        return [module]
    top = module.split(".")[0]
    return [] if top in ("gymnasium", "") else [top]


def module_folders(packages: tuple[str, ...]) -> list[str]:
    """The folders the env's own modules (``--env-package``) import from, so the client finds them run elsewhere."""
    import importlib.util

    folders = []
    for package in packages:
        spec = importlib.util.find_spec(package.split(".")[0])
        if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
            continue
        origin = Path(spec.origin)
        folder = origin.parent.parent if origin.name == "__init__.py" else origin.parent
        if str(folder) not in folders:
            folders.append(str(folder))
    return folders


def quantization(artifact: Artifact, claimed: QuantSpec, claimed_text: str) -> dict[str, Any]:
    """What the artifact's numbers are: per layer for ``c-int8``, the recipe otherwise."""
    if artifact.kind == "c":
        bits = artifact.info("program").weight_bits
        packing = "" if bits == 8 else ", two codes per byte (the even input in the low nibble)"
        return {
            "weights": f"int{bits}, per output channel, symmetric (codes in [-{2 ** (bits - 1) - 1}, "
            f"{2 ** (bits - 1) - 1}]){packing}",
            "activations": "int8, per tensor, asymmetric min-max over the calibration states",
            "accumulators": "int32; requantization by a Q31 multiplier and a shift per channel",
            "calibration": "the W8A8 fake-quant policy's 1000 visited states (seed 1000000)",
            "weight_bytes": artifact.info("weight_bytes"),
            "layers": artifact.info("layers"),
        }
    from quarl_bench.deploy.targets import KINDS

    if claimed.precision == "fp32":
        return {"weights": "fp32"}
    if artifact.backend in ("ort-int8-static", "ort-int8-dynamic"):
        return ort_quantization(artifact.backend, claimed_text)
    return {"recipe": KINDS.get(artifact.kind).recipe or artifact.backend, "claimed": claimed_text}


def ort_quantization(backend: str, claimed_text: str) -> dict[str, Any]:
    """What an ORT int8 graph's numbers are (``deploy/ort_int8.py``)."""
    from quarl_bench.deploy.ort_int8 import WEIGHT_FORMAT

    static = backend == "ort-int8-static"
    return {
        "weights": ("per output channel, " if static else "per tensor, ") + WEIGHT_FORMAT,
        "activations": "uint8, per tensor, asymmetric min-max over the claim's calibration states"
        if static
        else "uint8, per tensor, asymmetric, ranges computed at every call (dynamic)",
        "observation": "fp32 for vector observations: the first layer computes in fp32 with weights on the int8 grid"
        if static
        else "uint8 per tensor, like every activation",
        "decision_values": "fp32 (the last layer's output is not rounded)",
        "accumulators": "int32",
        "claimed": claimed_text,
    }


def cortex_m4_text(m4: dict[str, Any]) -> str:
    """policy.json's Cortex-M4 figures in one sentence (the README's and the console's)."""
    if "flash_bytes" not in m4:
        return f"Cortex-M4 build: not measured ({m4.get('skipped', '')})"
    return (
        f"Cortex-M4 build: {m4['flash_bytes']} bytes of flash (goal <= {m4['flash_limit_bytes']}), "
        f"{m4['ram_bytes']} bytes of RAM ({m4['static_ram_bytes']} static buffers, {m4['stack_bytes']} stack), "
        f"{m4['instructions_per_action']:.0f} instructions per action with the DSP path "
        f"({m4['instructions_per_action_plain']:.0f} without; {m4['macs_per_instruction']:.2f} MACs per instruction)"
    )


def readme(artifact: Artifact, ref: AgentRef, document: dict[str, Any]) -> str:
    """The folder's README.md: what it is, what was checked, and the plain client."""
    files = ", ".join(f"`{name}`" for name in document["files"])
    parity = document["parity"]
    certification = document.get("certification") or {}
    lines = [
        f"# {ref.algo} {ref.env_id}: backend {artifact.backend}",
        "",
        f"Made by quarl-bench from the agent with content sha256 {ref.content_hash}. Files: {files}; the contract "
        "(observation, action mapping, quantization, parity, certification) is `policy.json`.",
        "",
        f"- Parity gate against the fake-quant policy it claims to be ({parity['limit']}): "
        f"{'passed' if parity['passed'] else 'FAILED, written with --allow-divergent'}: {parity_text(parity)}.",
    ]
    what = certification.get("outcome", "return")
    for condition in certification.get("conditions") or [certification]:
        under = condition.get("condition", "nominal")
        for name, against in (("against_claimed", "that policy"), ("against_fp32", "the fp32 policy")):
            found = condition.get(name)
            if found:
                lines.append(
                    f"- Closed-loop {what} against {against}"
                    + (f" under {under}" if under != "nominal" else "")
                    + f": {found['verdict']} ({found['test'].split(':')[0]}, δ = {found['delta']:.3g}) after "
                    f"{found['episodes']} paired episodes, confidence {found['confidence']:.2f}, {found['guarantee']} "
                    f"guarantee; mean {found['artifact_return']['mean']:.2f} [{found['artifact_return']['lower']:.2f}, "
                    f"{found['artifact_return']['upper']:.2f}] against {found['reference_return']['mean']:.2f} "
                    f"[{found['reference_return']['lower']:.2f}, {found['reference_return']['upper']:.2f}]."
                )
    if "check" in document and "vectors" in document["check"]:
        check = document["check"]
        machine = check["machine"]
        lines.append(
            f"- `python check.py` (numpy and the runtime) replays the {check['vectors']} vectors of `vectors.npz` on "
            "the machine it runs on and passes only within this gate; at export they were measured on "
            f"{machine['cpu']} ({machine['cpu_kind']}: {' '.join(machine['int8_features']) or 'no int8 features'}) "
            f"with {', '.join(f'{k} {v}' for k, v in check['runtime'].items())}"
            + (f"; kernel: {check['kernel']}" if "kernel" in check else "")
            + "."
        )
    keys = document["observation"].get("keys")
    if keys:  # a Dict observation: the one input is its keys, concatenated
        order = ", ".join(f"`{key['name']}` ({key['size']})" for key in keys)
        lines.append(
            f"- Input: one float32 vector of {document['observation']['shape'][0]} values, the Dict observation's keys "
            f"concatenated in this order: {order} (`policy.json`'s `observation.keys`; `prepare` below does it)."
        )
    if "cortex_m4" in document:
        lines.append(f"- {cortex_m4_text(document['cortex_m4'])}.")
    if "c" in document:
        c = document["c"]
        lines += [
            f"- Build with `{c['required_flags']}`: the bit-exactness claim needs both (GCC's default -std=gnu11 "
            "contracts a * b + c into FMAs and changes actions). `make check` builds the check program on this host "
            f"and runs the {c['test_vectors']} test vectors (`vectors.h`: recorded observations with their output "
            "bits, then NaN, +-inf and huge values); `make m4` runs the same check on a Cortex-M4 under QEMU.",
            f"- `{c['function']}` returns -1 and writes no action for a NaN or infinite observation; it is not "
            "reentrant (static buffers). Observation values beyond `policy.json`'s `observation_saturation` "
            "ranges saturate.",
        ]
    from quarl_bench.deploy.targets import KINDS

    lines += [
        "",
        f"Play it with gymnasium and {KINDS.get(artifact.kind).runtime or 'torch'} alone, from this folder:",
        "",
        "```python",
        client(artifact.kind, "state" in document, "chunk" in document).rstrip(),
        "```",
        "",
    ]
    return "\n".join(lines)


def parity_text(parity: dict[str, Any]) -> str:
    """The parity gate's figure in words: the flips or the largest action error, over how many states."""
    if "flip_rate_outside_near_ties" in parity:
        return (
            f"flips outside near-ties {parity['flip_rate_outside_near_ties']:.1%} "
            f"(all states {parity['flip_rate']:.1%}, {parity['states']} states)"
        )
    if "flip_rate_outside_exact_ties" in parity:
        return f"flips outside exact ties {parity['flip_rate_outside_exact_ties']:.1%} ({parity['states']} states)"
    if "max_abs_error" in parity:
        return f"max |action - torch| {parity['max_abs_error']:.2g} ({parity['states']} states)"
    return (
        f"largest action error {parity['max_error_steps_outside_sensitive']:.2f} steps outside the sensitive quarter "
        f"({parity['max_error_steps']:.2f} over all {parity['states']} states)"
    )
