"""Findings: what rules report. Frozen, sortable, serialisable."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kgate.support.text import representable

if TYPE_CHECKING:
    from kgate.core.fix import Fix


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
class Related:
    """A second place a finding points at, and what is there: the access that breaks a rule, say, beside the
    kernel the finding is about.

    A place in a project file has its `path` (relative to the project, as a finding's) and 1-based `line`; a
    place in the compiler's output has an empty `path` and names `ptx_line`, the line in the PTX of the
    finding's kernel variant and target.
    """

    path: str
    line: int
    message: str
    ptx_line: int = 0

    @property
    def place(self) -> str:
        """`path:line`, or `PTX line N`."""
        return f"{self.path}:{self.line}" if self.path else f"PTX line {self.ptx_line}"

    def as_list(self) -> list[Any]:
        """The compact form a cache record stores."""
        return [self.path, self.line, self.message, self.ptx_line]

    @classmethod
    def from_record(cls, data: Any) -> Related:
        """From its JSON object or its compact list, every field of its type, or ValueError."""
        if isinstance(data, dict):
            if set(data) != {"path", "line", "message", "ptx_line"}:
                raise ValueError("not a related location")
            data = [data["path"], data["line"], data["message"], data["ptx_line"]]
        if not (isinstance(data, (list, tuple)) and len(data) == 4 and isinstance(data[0], str)
                and isinstance(data[2], str) and all(type(v) is int and v >= 0 for v in (data[1], data[3]))):
            raise ValueError("not a related location")
        return cls(data[0], data[1], data[2], data[3])


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
    # Other places the finding points at; never part of its identity, its baseline key or its fingerprint.
    related: tuple[Related, ...] = field(default=(), compare=False)
    # The change that removes the finding, when a rule knows one (`kgate lint --fix`); never serialised: a fix is
    # computed from the file as it is now.
    fix: Fix | None = field(default=None, compare=False, repr=False)
    # The codes of the findings on the same kernel variant that this one carries as their cause (one cause, one
    # finding: `kgate.evaluate.causes`), each said in a related place; never part of its identity.
    folded: tuple[str, ...] = field(default=(), compare=False)

    @property
    def baseline_key(self) -> str:
        """What the baseline pins: rule, path and stable identity, never a line number. Written in the baseline as
        it is, so a file name that is not UTF-8 takes the form the baseline can hold (`x\\xff.cu`)."""
        return representable(f"{self.code}|{self.path}|{self.identity}")

    @property
    def folded_keys(self) -> tuple[str, ...]:
        """The baseline keys the findings folded into this one had on their own (the same path and identity)."""
        return tuple(representable(f"{code}|{self.path}|{self.identity}") for code in self.folded)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["fix"]
        data["severity"] = self.severity.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        data = dict(data)
        data.pop("ratchet", None)  # what a JSON report adds: the baseline's word on the finding, not part of it
        data["severity"] = Severity(data["severity"])
        data["related"] = tuple(Related.from_record(r) for r in data.get("related", ()))
        data["folded"] = tuple(data.get("folded", ()))
        return cls(**data)


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.path, f.line, f.col, f.code, f.kernel or "", f.variant or "", f.target or "", f.message))
