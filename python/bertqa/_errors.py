"""The exceptions of the bertqa package: one per exit reason of the command line."""

import builtins
from typing import Any, Dict, List, Optional


class Error(Exception):
    """A run that failed. ``str(e)`` is the sentence the command writes after ``error:``.

    ``exit_code`` is the command line's exit status for the same failure.
    """

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(Error, ValueError):
    """Options that cannot work: unknown, missing, out of range or conflicting."""


class InputError(Error):
    """An input (data, predictions, vocabulary) that cannot be read or is malformed."""


class ConnectionError(Error, builtins.ConnectionError):  # noqa: A001 (the exit reason's name)
    """The server cannot be reached: refused, DNS, TLS, timeouts, credentials.

    Also Python's built-in ``ConnectionError``: ``except ConnectionError`` catches it.
    """


class ServerError(Error):
    """The server answered with an error, or with something its protocol does not allow."""


class ModelError(Error):
    """The model is not on the server, not ready, or its tensors cannot be bound."""


class GateFailed(Error):
    """The run completed, but a gate (``min_exact``, ``min_f1``, ...) failed.

    ``report`` is the complete result (what the call returns otherwise); ``gates``
    lists each failed gate as the command names it (``--min-f1 90: measured 85.200``).
    """

    exit_code = 1

    def __init__(self, gates: List[str], report: Optional[Dict[str, Any]] = None) -> None:
        super().__init__("; ".join(f"gate failed: {g}" for g in gates))
        self.gates = gates
        self.report = report


_BY_REASON = {
    "usage": UsageError,
    "input": InputError,
    "connection": ConnectionError,
    "server": ServerError,
    "model": ModelError,
}


def from_reason(reason: Optional[str], lines: List[str]) -> Error:
    """The exception of a failed command (not a gate failure)."""
    return _BY_REASON.get(reason or "", Error)("\n".join(lines))
