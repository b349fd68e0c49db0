"""Download ``sb3/{algo}-{env_id}`` from the Hugging Face hub into the local cache (rl-zoo3's own code).

Hub agents are pickles (the zip's objects, ``vecnormalize.pkl``): loading one runs code its author wrote.
huggingface_sb3 refuses unless ``TRUST_REMOTE_CODE`` is true; quarl-bench sets it only when the user opts in
(``--trust-remote-code``), and only for the download, never for the whole process.
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
from collections.abc import Iterator
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


@contextlib.contextmanager
def trusted_download() -> Iterator[None]:
    """``TRUST_REMOTE_CODE=True`` for the duration of one download, then whatever it was before."""
    before = os.environ.get("TRUST_REMOTE_CODE")
    os.environ["TRUST_REMOTE_CODE"] = "True"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TRUST_REMOTE_CODE", None)
        else:
            os.environ["TRUST_REMOTE_CODE"] = before


@contextlib.contextmanager
def optional_files_tolerated() -> Iterator[None]:
    """rl-zoo3 skips a missing ``vec_normalize.pkl`` by catching ``requests.HTTPError``, but huggingface_hub >= 1.0
    raises its own (httpx-based) errors, so every agent without normalisation failed to download. Widen that one
    ``except`` for the duration of the call."""
    import rl_zoo3.load_from_hub as zoo_hub
    from huggingface_hub import errors

    original = zoo_hub.HTTPError
    # what rl-zoo3's ``except HTTPError`` catches (the module's global, read at the except)
    zoo_hub.__dict__["HTTPError"] = (original, errors.HfHubHTTPError, errors.EntryNotFoundError)
    try:
        yield
    finally:
        zoo_hub.__dict__["HTTPError"] = original


def download(algo: str, env_id: str, cache_dir: Path, trust_remote_code: bool = False) -> None:
    """Fetch the agent into ``cache_dir/{algo}/{env_id}_N`` in the rl-zoo3 layout.

    :param trust_remote_code: the user's consent to unpickle what the hub serves.
    :raises QuarlError: when the hub is unreachable, has no such repository, or consent was not given.
    """
    if not hub_reachable():
        raise QuarlError("Hugging Face hub unreachable (offline?)")
    if not trust_remote_code and os.environ.get("TRUST_REMOTE_CODE", "").lower() not in ("1", "true", "yes"):
        raise QuarlError(
            f"hub agent {HUB_ORGANIZATION}/{algo}-{env_id} is a pickle that runs code when loaded: "
            "pass --trust-remote-code to download it"
        )
    from huggingface_sb3 import EnvironmentName
    from rl_zoo3.load_from_hub import download_from_hub

    try:
        with trusted_download(), optional_files_tolerated(), contextlib.redirect_stdout(io.StringIO()):
            download_from_hub(algo, EnvironmentName(env_id), 0, str(cache_dir), HUB_ORGANIZATION)
    except Exception as error:  # huggingface_hub raises many types: missing repo, HTTP, offline cache
        raise QuarlError(
            f"hub download of {HUB_ORGANIZATION}/{algo}-{env_id} failed: {type(error).__name__}"
        ) from error
