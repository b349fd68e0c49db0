"""The one exception type the CLI turns into a one-line message and exit code 2, and the log the library's notes go
to (the CLI prints them; a program configures ``logging`` to see them)."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

notes = logging.getLogger("quarl_bench")  # what a command says beside its answer (an agent skipped, old rows)
notes.addHandler(logging.NullHandler())  # a program sees notes only where it configures logging (library habit)
# above WARNING: the CLI silences library records up to WARNING for a whole command (zoo/quiet.py), not these
NOTE = logging.WARNING + 5
logging.addLevelName(NOTE, "NOTE")


# the real stderr while a block sends file descriptor 2 to /dev/null (``zoo.quiet.native_output_silenced``)
terminal_stderr: list[TextIO] = []


class StderrNotes(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is when a note is written (tests and callers swap it), not at creation, or to
    the real stderr while native output is silenced."""

    quarl_cli = True

    @property
    def stream(self):
        return terminal_stderr[-1] if terminal_stderr else sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def show_notes() -> None:
    """The library's notes as ``quarl-bench: ...`` lines on stderr, once per process (the CLI, and the evaluation
    workers of a CLI run: a long evaluation's heartbeat is written there)."""
    if not notes_shown():
        handler = StderrNotes()
        handler.setFormatter(logging.Formatter("quarl-bench: %(message)s"))
        notes.addHandler(handler)
        notes.setLevel(NOTE)


def notes_shown() -> bool:
    """Whether this process prints the notes (the CLI does; a program using the library sees them through logging)."""
    return any(getattr(handler, "quarl_cli", False) for handler in notes.handlers)


def note(message: str) -> None:
    """Say ``message`` beside a command's answer: the CLI prints it on stderr as ``quarl-bench: message``."""
    notes.log(NOTE, message)


class QuarlError(Exception):
    """A problem with the user's input or surroundings (bad value, missing agent, no network).

    The message is one line that names the bad value and what is accepted.
    """


class Interrupted(QuarlError):
    """A run stopped from outside (SIGTERM, SIGINT) after storing what it measured: the CLI says so in one line and
    exits 130, as a shell does for an interrupted command."""
