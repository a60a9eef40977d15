"""The one error type people see: a one-line message, exit code 2 at the CLI edge."""

from __future__ import annotations


class PersonagraphError(Exception):
    """A problem with the user's input or environment, stated in one line.

    Raised anywhere below the CLI; the CLI prints ``str(error)`` and exits with code 2. Never use it
    for bugs: those should keep their traceback.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
