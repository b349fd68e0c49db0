"""Keep library chatter off the console of ``run``/``sweep``: deprecation warnings, and pybullet's C-level
``pybullet build time`` / ``argv[0]=`` lines, which bypass Python's ``sys.stdout``."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator

NOISY_CATEGORIES = (DeprecationWarning, PendingDeprecationWarning, FutureWarning, UserWarning)


def silence_library_warnings() -> None:
    """Ignore the warning categories libraries use for chatter (in this process; workers call it too)."""
    for category in NOISY_CATEGORIES:
        warnings.filterwarnings("ignore", category=category)


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """For a whole command: library warnings and log records below ERROR off (onnxruntime's quantizer logs advice
    on the root logger, torchao its optional kernels), restored afterwards (tests run commands in-process)."""
    with warnings.catch_warnings():
        silence_library_warnings()
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


@contextlib.contextmanager
def native_output_silenced() -> Iterator[None]:
    """Send file descriptors 1 and 2 to /dev/null for a block: what C code prints (pybullet) goes nowhere.

    Python's own output in the block is lost too, so only library calls belong inside, but for the library's notes
    (``errors.note``: a long evaluation's heartbeat), which go to the real stderr; an exception still propagates
    (and is reported after the block). Enter it before any ``redirect_stdout``: it silences the descriptors of the
    streams it finds, and a ``StringIO`` has none (panda-gym's PyBullet printed its ``argv[0]=...`` lines so).
    """
    streams = []
    for stream in (sys.stdout, sys.stderr):
        try:
            streams.append((stream, stream.fileno()))
        except (AttributeError, OSError, ValueError):  # no real file (captured by pytest, a notebook): leave it
            continue
    from quarl_bench.errors import terminal_stderr

    devnull = os.open(os.devnull, os.O_WRONLY)
    saved = []
    terminal = None
    try:
        for stream, fd in streams:
            stream.flush()
            saved.append((stream, fd, os.dup(fd)))
            if stream is sys.stderr and not terminal_stderr:  # the outermost block holds the real stderr
                terminal = open(saved[-1][2], "w", buffering=1, closefd=False)  # noqa: SIM115
                terminal_stderr.append(terminal)  # the library's notes (a heartbeat) still reach the user
            os.dup2(devnull, fd)
        yield
    finally:
        if terminal is not None:
            terminal_stderr.remove(terminal)
            terminal.close()
        for stream, fd, copy in saved:
            stream.flush()
            os.dup2(copy, fd)
            os.close(copy)
        os.close(devnull)
