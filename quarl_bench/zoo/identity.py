"""An agent's identity: one content hash, over the files that decide how it acts (or, for a policy no file holds,
over its weights). Every source (zoo folder, cache, hub, a user's zip or ONNX file, a torch module, an in-memory
model) names its agent by it, so the same policy gets the same job keys however it was found."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any


def content_hash(paths: list[Path], extra: str = "") -> str:
    """sha256 over each existing file's name and bytes, then ``extra`` (16 hex digits)."""
    digest = hashlib.sha256()
    for path in paths:
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    digest.update(extra.encode())
    return digest.hexdigest()[:16]


def weights_hash(state: dict[str, Any], prefix: bytes = b"") -> str:
    """sha256 over ``prefix`` and a state dict's names and tensor bytes (16 hex digits): a policy's identity when
    no file holds it."""
    digest = hashlib.sha256(prefix)
    for name, tensor in state.items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]
