"""What a run reads: the artifacts rules declare, and the plan the compile and facts stages carry out.

Every rule says which artifacts it reads (`Rule.reads`). The compiler's PTX, ptxas log and TTGIR come with every
compile; the SASS costs a disassembly (about half a second per cubin), so a rule that reads it for some kernels
only says for which (`Rule.sass_when`: a test of a kernel's facts read without SASS). The rules stage turns the
run's selection into one `ArtifactPlan` (`kgate.evaluate.plan`) before anything compiles; the compile and facts
stages produce what the plan asks for and know no rule: a kernel is disassembled when the plan wants its SASS,
and its facts read from SASS are left out when the plan does not.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class Artifact(enum.Enum):
    """What a rule reads: the project's source files, the compiler's output, or the capture file."""

    SOURCE = "source"
    PTX = "ptx"
    SASS = "sass"
    CUBIN = "cubin"  # the cubin itself, as written: what `kgate diff` compares
    PTXAS_LOG = "ptxas_log"
    TTGIR = "ttgir"
    CAPTURE = "capture"


# A test of one kernel's facts (`kgate.facts.model.KernelFacts`, read without its SASS): whether a rule reads the
# kernel's SASS. A function of a module (a rule's), so that it reaches the compile workers by name.
KernelTest = Callable[[Any], bool]


@dataclass(frozen=True)
class Need:
    """One artifact a selected rule reads: of every kernel (`when` None), or of the kernels `when` holds for."""

    artifact: Artifact
    when: KernelTest | None = None

    def label(self) -> str:
        """The need as text (for keys and messages): the artifact, and the test by its module and name."""
        if self.when is None:
            return self.artifact.value
        return f"{self.artifact.value}:{self.when.__module__}.{self.when.__qualname__}"


@dataclass(frozen=True)
class ArtifactPlan:
    """The artifacts a run produces, from the rules it selects: made once, before the first compile."""

    needs: tuple[Need, ...] = ()

    @property
    def reads(self) -> frozenset[Artifact]:
        """Every artifact some selected rule reads, of some kernel at least."""
        return frozenset(need.artifact for need in self.needs)

    def wants(self, artifact: Artifact, facts: Any) -> bool:
        """Whether some selected rule reads `artifact` of the kernel these facts describe."""
        return any(need.artifact is artifact and (need.when is None or need.when(facts)) for need in self.needs)

    def key(self) -> list[str]:
        """The plan as sorted text: what a record that depends on it is keyed by."""
        return sorted({need.label() for need in self.needs})


# What a run that selects nothing reads: no SASS is disassembled.
NOTHING = ArtifactPlan()
