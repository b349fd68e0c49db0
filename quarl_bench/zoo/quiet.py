"""Keep library chatter off the console of ``run``/``sweep``: deprecation warnings, and pybullet's C-level
``pybullet build time`` / ``argv[0]=`` lines, which bypass Python's ``sys.stdout``."""

from __future__ import annotations

import contextlib
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
    """For a whole command: library warnings off, restored afterwards (tests run commands in-process)."""
    with warnings.catch_warnings():
        silence_library_warnings()
        yield


@contextlib.contextmanager
def native_stdout_silenced() -> Iterator[None]:
    """Send file descriptor 1 to /dev/null for a block: what C code prints (pybullet) goes nowhere.

    Python's own ``print`` output in the block is lost too, so only library calls belong inside.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # no real stdout (captured by pytest, a notebook): nothing to do
        yield
        return
    sys.stdout.flush()
    saved = os.dup(fd)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, fd)
        os.close(saved)
        os.close(devnull)
