"""The one exception type the CLI turns into a one-line message and exit code 2, and the log the library's notes go
to (the CLI prints them; a program configures ``logging`` to see them)."""

from __future__ import annotations

import logging

notes = logging.getLogger("quarl_bench")  # what a command says beside its answer (an agent skipped, old rows)


class QuarlError(Exception):
    """A problem with the user's input or surroundings (bad value, missing agent, no network).

    The message is one line that names the bad value and what is accepted.
    """
