"""Joining Ray: a local cluster by default, or an existing one at an address, with a one-line error if that fails."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

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


def ray_log_path(store_path: Path) -> Path:
    """Where Ray's own output goes for a command on ``store_path``: a log file beside the store."""
    return Path(store_path).with_name(Path(store_path).stem + ".ray.log")


def native_stderr_to(log_path: Path) -> None:
    """From now on, what native code writes to this process's stderr (Ray's C++ core worker: its "E ... core_worker"
    lines, ``[state-dump]`` blocks when a node dies) and what the processes Ray starts inherit goes to ``log_path``;
    Python's own ``sys.stderr`` (quarl-bench's one-line errors, warnings) keeps the terminal."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    terminal = os.dup(2)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 2)
    os.close(log)
    sys.stderr = open(terminal, "w", buffering=1, encoding="utf-8", errors="replace", closefd=True)  # noqa: SIM115


def connect(address: str | None, log_path: Path | None = None) -> None:
    """``ray.init`` for this process (a new local cluster when ``address`` is None); with ``log_path``, Ray's own
    output goes there (:func:`native_stderr_to`), not to the user's terminal.

    :raises QuarlError: when the cluster at ``address`` cannot be reached or refuses the connection.
    """
    import ray

    if address is not None:
        probe(address)
    # only a process that owns its stderr (the CLI): under a test runner or a notebook, stderr is theirs
    own_log = log_path if log_path is not None and not ray.is_initialized() and sys.stderr is sys.__stderr__ else None
    if own_log is not None:
        native_stderr_to(own_log)
    try:
        # None: a new local cluster, as "local" says (Ray's default joins the cluster /tmp/ray last recorded, and
        # hangs for minutes when that cluster died: measured after a killed run)
        ray.init(address=address or "local", include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    except (ConnectionError, ray.exceptions.RayError) as error:
        # Ray 2.60 (measured here) starts clusters with token authentication on; a driver only sends the token in token mode.
        hint = "" if os.environ.get("RAY_AUTH_MODE") == "token" else "; if it uses token auth, set RAY_AUTH_MODE=token"
        raise QuarlError(f"cannot join the Ray cluster at {address!r}: {str(error).splitlines()[0]}{hint}") from error
    if own_log is not None:
        cluster_errors_to(own_log)


def cluster_errors_to(log_path: Path) -> None:
    """Ray's driver prints the errors the cluster publishes (a raylet's death comes with its last 20 log lines,
    mostly ``[state-dump]``) to stdout from a thread of its own (``listen_error_messages``); Ray 2.60 has no
    switch for it. They go to ``log_path`` instead, and the terminal gets one line saying where."""
    import ray._private.worker as ray_worker

    told: list[bool] = []

    def to_log(data: dict, ignore_prefix: bool) -> None:
        with open(log_path, "a", encoding="utf-8") as log:
            ray_worker.print_worker_logs(data, log, ignore_prefix)
        if not told:
            told.append(True)
            print(
                f"quarl-bench: the Ray cluster reported an error (a node lost?); Ray retries its tasks; see {log_path}",
                file=sys.stderr,
            )

    ray_worker.print_to_stdstream = to_log
