"""Download ``sb3/{algo}-{env_id}`` from the Hugging Face hub into the local cache (rl-zoo3's own code)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from quarl_bench.errors import QuarlError

HUB_ORGANIZATION = "sb3"
PROBE_TIMEOUT_S = 3.0


def hub_reachable(timeout: float = PROBE_TIMEOUT_S) -> bool:
    """One TCP connect to the hub, so that offline we fail in seconds, not after the client's retries."""
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((endpoint.hostname or "huggingface.co", port), timeout=timeout):
            return True
    except OSError:
        return False


def download(algo: str, env_id: str, cache_dir: Path) -> None:
    """Fetch the agent into ``cache_dir/{algo}/{env_id}_1`` in the rl-zoo3 layout.

    The sb3 organization's agents are pickles; asking for them by name is taken as trusting them
    (``huggingface_sb3`` otherwise refuses unless ``TRUST_REMOTE_CODE`` is set).

    :raises QuarlError: when the hub is unreachable or has no such repository.
    """
    if not hub_reachable():
        raise QuarlError("Hugging Face hub unreachable (offline?)")
    from huggingface_sb3 import EnvironmentName
    from rl_zoo3.load_from_hub import download_from_hub

    os.environ.setdefault("TRUST_REMOTE_CODE", "True")
    try:
        download_from_hub(algo, EnvironmentName(env_id), 0, str(cache_dir), HUB_ORGANIZATION)
    except Exception as error:  # huggingface_hub raises many types: missing repo, HTTP, offline cache
        raise QuarlError(
            f"hub download of {HUB_ORGANIZATION}/{algo}-{env_id} failed: {type(error).__name__}"
        ) from error
