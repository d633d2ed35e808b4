"""Findings: what rules report. Frozen, sortable, serialisable."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

from kgate.support.text import representable


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "note": 2}[self.value]

    @property
    def fails(self) -> bool:
        """Whether a finding of this severity makes the run fail."""
        return self is not Severity.NOTE


@dataclass(frozen=True, order=True)
class Finding:
    """One reported problem.

    `identity` is what the baseline keys on: a kernel, variant and target for
    compiled findings, an enclosing scope plus a normalised snippet for source
    findings. It never contains a line number.
    """

    path: str
    line: int
    col: int
    code: str
    name: str
    severity: Severity = field(compare=False)
    message: str
    kernel: str | None = None
    variant: str | None = None
    target: str | None = None
    identity: str = ""
    end_line: int | None = field(default=None, compare=False)
    end_col: int | None = field(default=None, compare=False)
    # A size-like measurement the rule made (e.g. code lines of a file), for slack in the baseline.
    value: int | None = field(default=None, compare=False)

    @property
    def baseline_key(self) -> str:
        """What the baseline pins: rule, path and stable identity, never a line number. Written in the baseline as
        it is, so a file name that is not UTF-8 takes the form the baseline can hold (`x\\xff.cu`)."""
        return representable(f"{self.code}|{self.path}|{self.identity}")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["severity"] = self.severity.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        data = dict(data)
        data["severity"] = Severity(data["severity"])
        return cls(**data)


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.path, f.line, f.col, f.code, f.kernel or "", f.variant or "", f.target or "", f.message))
