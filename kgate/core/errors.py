"""kgate's own error types.

Anything a user can cause (a bad configuration, a missing compiler, a corrupt
baseline) is raised as a `KgateError` and printed as one line with exit code 2;
a traceback is only ever shown for a bug in kgate itself.
"""

from __future__ import annotations


class KgateError(Exception):
    """A user-facing error: printed as one line, exit code 2."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
            where += ": "
        return where + self.message


class ConfigError(KgateError):
    """The configuration (pyproject.toml / kgate.toml / flags) is invalid."""


class ToolchainError(KgateError):
    """A compiler or binary tool is missing, crashed, or timed out."""


class BaselineError(KgateError):
    """The baseline file cannot be read or written."""


class CaptureError(KgateError):
    """The capture file cannot be read or written, or `kgate capture` cannot run its command."""


class ParseError(KgateError):
    """Compiler output that kgate cannot make sense of."""


def did_you_mean(name: str, choices: list[str] | set[str], cutoff: float = 0.6) -> str:
    """` (did you mean 'x'?)` for the closest of `choices` to a mistyped `name`, or ""."""
    import difflib

    matches = difflib.get_close_matches(name, sorted(choices), n=1, cutoff=cutoff)
    return f" (did you mean {matches[0]!r}?)" if matches else ""

