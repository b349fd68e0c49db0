"""Joining Ray: a local cluster by default, or an existing one at an address, with a one-line error if that fails."""

from __future__ import annotations

import os
import socket

from quarl_bench.errors import QuarlError

PROBE_TIMEOUT_S = 3.0


def probe(address: str) -> None:
    """Fail fast on a HOST:PORT nobody listens on (``ray.init`` would retry for minutes)."""
    if address == "auto" or "://" in address or ":" not in address:
        return  # "auto", ray://HOST:PORT (Ray Client) and bare hosts are left to Ray
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise QuarlError(f"bad Ray address {address!r}: expected HOST:PORT, ray://HOST:PORT or auto")
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as error:
        raise QuarlError(f"cannot reach the Ray cluster at {address!r}: {error}") from error


def connect(address: str | None) -> None:
    """``ray.init`` for this process (a new local cluster when ``address`` is None).

    :raises QuarlError: when the cluster at ``address`` cannot be reached or refuses the connection.
    """
    import ray

    if address is not None:
        probe(address)
    try:
        ray.init(address=address, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    except (ConnectionError, ray.exceptions.RayError) as error:
        # Ray 2.60 (measured here) starts clusters with token authentication on; a driver only sends the token in token mode.
        hint = "" if os.environ.get("RAY_AUTH_MODE") == "token" else "; if it uses token auth, set RAY_AUTH_MODE=token"
        raise QuarlError(f"cannot join the Ray cluster at {address!r}: {str(error).splitlines()[0]}{hint}") from error
