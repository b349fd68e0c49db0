"""The one exception type the CLI turns into a one-line message and exit code 2."""

from __future__ import annotations


class QuarlError(Exception):
    """A problem with the user's input or surroundings (bad value, missing agent, no network).

    The message is one line that names the bad value and what is accepted.
    """
