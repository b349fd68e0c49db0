"""The parity gate that travels with an ORT, LiteRT or ExecuTorch artifact: ``vectors.npz`` (the gate's first fixed
states, the artifact's outputs there on the exporting machine, the claimed policy's actions and which states the gate
counts) and ``check.py``, a plain script (numpy and the runtime, no quarl-bench) that replays them on the machine it
runs on and passes only within the artifact's own gate, naming the machine feature that made it differ.
``quarl-bench verify DIR`` runs the same script.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np

VECTORS = 256  # the gate's first fixed states (vector observations)
IMAGE_VECTORS = 16  # image observations: 16 stacked frames are ~450 kB

CHECK = """
FEATURES = ("avx2", "avx512bw", "avx512_vnni", "avx_vnni", "avx_vnni_int8", "amx_int8", "asimd", "asimddp", "i8mm")


def int8_features():
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        return []
    flags = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags |= set(value.split())
    return [flag for flag in FEATURES if flag in flags]


def runtime_versions():
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in gate["runtime"]:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


gate = contract["check"]
vectors = np.load("vectors.npz")
outputs = np.stack([np.asarray(act(prepare(obs))).reshape(-1) for obs in vectors["observations"]])
claimed, counted, recorded = vectors["claimed"], vectors["counted"], vectors["outputs"]
if gate["measure"] == "flips":
    figure = float((outputs.reshape(-1) != claimed.reshape(-1))[counted].mean()) if counted.any() else 0.0
    text = f"flip rate outside near-ties {figure:.1%} (limit {gate['limit']:.0%})"
elif gate["measure"] == "abs":
    figure = float(np.abs(outputs - claimed.reshape(len(outputs), -1)).max())
    text = f"largest action error {figure:.2g} (limit {gate['limit']:g})"
else:
    steps = np.abs(outputs - claimed.reshape(len(outputs), -1)) / np.float64(gate["step"])
    figure = float(steps.max(axis=1)[counted].max()) if counted.any() else 0.0
    text = f"largest action error outside the sensitive quarter {figure:.2f} steps (limit {gate['limit']:g})"
passed = figure <= gate["limit"]
same = np.allclose(outputs, recorded.reshape(outputs.shape), rtol=0, atol=1e-6)
differ = int((np.abs(outputs.astype(np.float64) - recorded.reshape(outputs.shape)) > 1e-6).any(axis=1).sum())
here, there = int8_features(), gate["machine"]["int8_features"]
versions, recorded_versions = runtime_versions(), gate["runtime"]
print(f"{len(outputs)} vectors against the claimed policy: {text}: {'passed' if passed else 'FAILED'}")
if same:
    print("outputs identical to those recorded at export")
else:
    causes = []
    if set(here) != set(there):
        causes.append(f"int8 features here {' '.join(here) or 'none'}, at export {' '.join(there) or 'none'}")
    if versions != recorded_versions:
        causes.append(f"runtime here {versions}, at export {recorded_versions}")
    cause = "; ".join(causes) or "same CPU features and runtime: the artifact or its runtime's files changed"
    print(f"outputs differ from those recorded at export on {differ} of {len(outputs)} vectors: {cause}")
sys.exit(0 if passed else 1)
"""


def check_script(kind: str, chunk: bool = False) -> str:
    """``check.py`` for an artifact of ``kind``: the plain client's ``act`` (a chunk artifact's: its runtime, from
    a fresh state on the recorded noise) and the replay."""
    from quarl_bench.deploy.chunk_artifact import CHECK_CLIENT
    from quarl_bench.deploy.contract import PREPARE
    from quarl_bench.deploy.targets import KINDS

    head = "import json\nimport sys\n\nimport numpy as np\n\n"
    head += 'contract = json.load(open("policy.json"))\n'
    return head + (CHECK_CLIENT if chunk else KINDS.get(kind).client) + "\n" + PREPARE + CHECK


def vectors(
    raw_states: np.ndarray,
    outputs: np.ndarray,
    claimed: np.ndarray,
    counted: np.ndarray,
    image: bool,
    noise: np.ndarray | None = None,
) -> bytes:
    """``vectors.npz``: the first gate states with the artifact's outputs, the claimed actions and the gate's mask
    (a denoising artifact's: each state's chunk noise too, ``(vector, 1 + steps, size, action_dim)``)."""
    count = IMAGE_VECTORS if image else VECTORS
    buffer = io.BytesIO()
    arrays: dict[str, Any] = {
        "observations": np.asarray(raw_states[:count]),
        "outputs": np.asarray(outputs[:count], dtype=np.float64).reshape(min(count, len(outputs)), -1),
        "claimed": np.asarray(claimed[:count], dtype=np.float64),
        "counted": np.asarray(counted[:count], dtype=bool),
    }
    if noise is not None:
        arrays["noise"] = np.asarray(noise[:count], dtype=np.float32)
    np.savez_compressed(buffer, allow_pickle=False, **arrays)
    return buffer.getvalue()


def gate_record(detail: dict[str, Any], artifact: Any) -> dict[str, Any]:
    """``policy.json``'s ``check``: what ``check.py`` measures and its limit (the parity gate's ``detail``), the
    machine and runtime the gate was measured with, and (ONNX) the kernels ORT chose there."""
    from quarl_bench.deploy.machine import machine_record, ort_kernel, runtime_versions

    record: dict[str, Any] = {"run": "python check.py  (or: quarl-bench verify FOLDER)"}
    record |= {key: detail[key] for key in ("measure", "limit", "step") if key in detail}
    record |= {"vectors": int(min(len(detail["actions"]), VECTORS)), "machine": machine_record()}
    record["runtime"] = runtime_versions(artifact.kind)
    if artifact.kind == "onnx":
        from quarl_bench.deploy.ort_int8 import kernels, weight_types

        weights = weight_types(artifact.data)
        record["ort_ops"] = kernels(artifact.data)
        record["weights"] = weights
        if "UINT8" in weights or "INT8" in weights:
            record["kernel"] = ort_kernel(record["machine"]["int8_features"], "INT8" not in weights)
    return record


def travelling_gate(artifact: Any, module: Any, detail: dict[str, Any], document: dict[str, Any]) -> dict[str, bytes]:
    """``vectors.npz`` and ``check.py`` for an ORT, LiteRT or ExecuTorch artifact (``document`` gains ``check``:
    the gate's measure and the machine, runtime and kernels it was measured with); nothing for other kinds and
    recurrent artifacts, whose vectors would need their state."""
    from quarl_bench.deploy.targets import KINDS

    if not KINDS.get(artifact.kind).checked or "actions" not in detail:
        return {}
    if artifact.info("recurrent") is not None:  # the machine its gate was measured on, and no vectors
        from quarl_bench.deploy.machine import machine_record, runtime_versions

        document["check"] = {
            "run": "none: a recurrent artifact's vectors would need its state at every step",
            "machine": machine_record(),
            "runtime": runtime_versions(artifact.kind),
        }
        return {}
    image = bool(getattr(module, "image", False))
    chunk, noise = artifact.info("chunk") is not None, None
    if chunk:  # the noise each state's chunk was denoised from, so that check.py replays the same
        from quarl_bench.deploy.chunk_artifact import ChunkRunner

        noise = ChunkRunner(artifact).noise_of(detail["raw_states"][:VECTORS])
    raw, actions, claimed, counted = (detail[k] for k in ("raw_states", "actions", "claimed", "counted"))
    files = {
        "vectors.npz": vectors(raw, actions, claimed, counted, image, noise),
        "check.py": check_script(artifact.kind, chunk).encode(),
    }
    document["check"] = gate_record(detail, artifact)
    document["files"] |= {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    return files


def run_check(folder: Path, emulate: str = "") -> tuple[bool, list[str]]:
    """Replay ``folder``'s vectors: its ``check.py`` with this Python and the runtime present, or (``emulate``:
    ``exact`` or ``avx2``, ONNX artifacts) the graph in numpy with that kernel's integer arithmetic.

    :raises QuarlError: in one line, for a folder without ``policy.json``, ``check.py`` and ``vectors.npz``, or an
        emulation asked of an artifact that is not an ONNX graph.
    """
    import json
    import subprocess
    import sys

    from quarl_bench.errors import QuarlError

    if not emulate and all((folder / name).is_file() for name in ("policy.json", "Makefile", "check.c")):
        return c_check(folder)
    missing = [name for name in ("policy.json", "check.py", "vectors.npz") if not (folder / name).is_file()]
    if missing:
        raise QuarlError(
            f"{str(folder)!r} is not a checkable artifact folder (no {', '.join(missing)}): expected a folder "
            "written by `quarl-bench export` (an ort-*, litert-* or executorch-* folder, or a c-* one with its Makefile)"
        )
    if not emulate:
        done = subprocess.run([sys.executable, "check.py"], cwd=folder, capture_output=True, text=True)
        lines = (done.stdout + done.stderr).strip().splitlines()
        return done.returncode == 0, lines
    contract = json.loads((folder / "policy.json").read_text())
    if "chunk" in contract:
        raise QuarlError(
            f"--emulate {emulate} replays one ONNX graph per action: {str(folder)!r} holds a chunk artifact, whose "
            "runtime.py runs its loop; expected a folder of a policy that maps one observation to one action "
            "(run its check without --emulate)"
        )
    if not (folder / "policy.onnx").is_file():
        raise QuarlError(
            f"--emulate {emulate} replays ONNX Runtime's int8 kernels: {str(folder)!r} holds a "
            f"{contract.get('backend', 'non-ONNX')} artifact; expected an ort-* artifact folder"
        )
    return emulated_check(folder, contract, emulate)


def c_check(folder: Path) -> tuple[bool, list[str]]:
    """A C artifact folder's own check, ``make check`` (its test vectors, bit for bit, on this host's compiler), run
    on a copy so that the folder is left as it was.

    :raises QuarlError: in one line, where no C compiler or make is found.
    """
    import shutil
    import subprocess
    import tempfile

    from quarl_bench.errors import QuarlError

    if shutil.which("make") is None or shutil.which("cc") is None:
        raise QuarlError(f"{str(folder)!r} is a C artifact: its check needs make and a C compiler (cc), not found")
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "artifact"
        shutil.copytree(folder, copy)
        done = subprocess.run(["make", "-s", "check"], cwd=copy, capture_output=True, text=True)
    lines = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode == 0, lines


def emulated_check(folder: Path, contract: dict[str, Any], kernel: str) -> tuple[bool, list[str]]:
    """The gate on ``folder``'s vectors with the ONNX graph played by :mod:`~quarl_bench.deploy.int8_emulation`."""
    from quarl_bench.deploy.int8_emulation import emulated

    gate = contract["check"]
    data = np.load(folder / "vectors.npz")
    observations = np.asarray(data["observations"], dtype=np.float32)
    statistics = (
        None if contract["observation"]["normalization_inside"] else contract["observation"].get("normalization")
    )
    if statistics is not None:
        scaled = (observations - np.float32(statistics["mean"])) * np.float32(statistics["scale"])
        observations = np.clip(scaled, -statistics["clip"], statistics["clip"]).astype(np.float32)
    outputs = emulated((folder / "policy.onnx").read_bytes(), observations, kernel).reshape(len(observations), -1)
    claimed, counted, recorded = data["claimed"], data["counted"], data["outputs"]
    if gate["measure"] == "flips":
        figure = float((outputs.reshape(-1) != claimed.reshape(-1))[counted].mean()) if counted.any() else 0.0
        text = f"flip rate outside near-ties {figure:.1%} (limit {gate['limit']:.0%})"
    else:
        errors = np.abs(outputs - claimed.reshape(len(outputs), -1))
        if gate["measure"] == "steps":
            errors = errors / np.float64(gate["step"])
        figure = float(errors.max(axis=1)[counted].max()) if counted.any() else 0.0
        text = f"largest action error outside the sensitive quarter {figure:.2f} {gate['measure']}"
    passed = figure <= gate["limit"]
    moved = int((np.abs(outputs - recorded.reshape(outputs.shape)) > 1e-6).any(axis=1).sum())
    lines = [
        f"{len(outputs)} vectors, int8 products emulated as the {kernel} kernel computes them: {text}: "
        f"{'passed' if passed else 'FAILED'}",
        f"outputs differ from those recorded at export on {moved} of {len(outputs)} vectors"
        + (f" ({gate.get('kernel', 'kernel not recorded')} at export)" if moved else ""),
    ]
    return passed, lines
