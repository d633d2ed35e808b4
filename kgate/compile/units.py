"""What the compile stage hands on: each compiled unit's artifacts, as the compiler wrote them.

A unit is one Triton variant for one target, or one CUDA source file for one target (its kernels together).
Its artifacts are the compiler's own output, kept in the cache under `v1/artifacts/<key>/`:

    kernel.ptx     the PTX (every entry of a CUDA file)
    ptxas.log      ptxas's `-v` report: registers, spills, stack, static shared memory per entry
    kernel.ttgir   Triton's GPU IR (Triton only)
    kernel.sass    `cuobjdump -sass` of the cubin, where the run's plan wants SASS (of some functions, for CUDA)
    kernel.cubin   the cubin itself (its jump tables, which the SASS listing leaves out, are read from it)

with what the cubin's launch needs beyond them (`dynamic_smem`: the shared memory Triton's launcher asks for).
The compile record of a unit holds the content hash of each text, and a text is read back only while it has
that content. Nothing here parses: the facts stage (`kgate.facts`) turns artifacts into facts.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kgate.collect.cuda_launches import LaunchSite
from kgate.compile.cache import kept, write_artifact
from kgate.core.findings import Related
from kgate.support.atomicio import read_cached

# Artifact name -> its file in the unit's folder (the cubin is kept beside them, hashed in the record's meta).
FILES = {"ptx": "kernel.ptx", "ptxas_log": "ptxas.log", "ttgir": "kernel.ttgir", "sass": "kernel.sass"}
CUBIN = "kernel.cubin"


@dataclass(frozen=True)
class Artifacts:
    """The compiler's output for one unit: the texts facts are read from."""

    ptx: str
    ptxas_log: str
    ttgir: str = ""
    sass: str | None = None  # None where the cubin was not disassembled
    # The functions the SASS listing was asked for (CUDA: `nvdisasm -fun`); None: every function of the cubin.
    sass_symbols: tuple[str, ...] | None = None
    dynamic_smem: int = 0  # shared memory the launcher adds to the cubin's static figure (Triton's metadata.shared)
    cubin: tuple[str, str | None] = ("", None)  # where the cubin is and the hash it was written with
    # Where the unit's kernels are launched with different dynamic shared memory (a CuTe DSL call launching several):
    # each entry's own, in place of `dynamic_smem`.
    entry_smem: dict[str, int] = field(default_factory=dict)

    def smem_of(self, entry: str) -> int:
        """The dynamic shared memory one entry is launched with."""
        return self.entry_smem.get(entry, self.dynamic_smem)

    def cubin_data(self) -> bytes | None:
        """The cubin's bytes as they were written, or None where it is missing, damaged or not a regular file."""
        path, digest = self.cubin
        data = read_cached(Path(path)) if path else None
        if data is None or (digest is not None and hashlib.sha256(data).hexdigest() != digest):
            return None
        return data


def steady_log(text: str) -> str:
    """A ptxas log without its timing lines (`Compile time = 3.6 ms`): two compiles of the same input, by two
    runs sharing a cache at once, then keep the same artifact, and neither's record is the other's mismatch."""
    return "\n".join(line for line in text.split("\n") if "Compile time =" not in line)


def cubin_file(folder: Path, digest: str | None) -> tuple[str, str | None]:
    """Where a unit's cubin with this content hash is (`Compiled.cubin`); the latest one written where none is known."""
    return (str(kept(folder / CUBIN, digest) if digest else folder / CUBIN), digest)


def store_text(folder: Path, name: str, text: str) -> str:
    """Write one artifact into a unit's folder (in a compile worker); its content hash, for the record."""
    return write_artifact(folder / FILES[name], text.encode())


def read_text(folder: Path, name: str, digest: str) -> str | None:
    """An artifact as it was written (kept by its hash: another compile of its key may have written others since),
    or None where it is missing, damaged or not a regular file."""
    data = read_cached(kept(folder / FILES[name], digest))
    if data is None or hashlib.sha256(data).hexdigest() != digest:
        return None
    return data.decode("utf-8", "replace")


@dataclass(frozen=True)
class Compiled:
    """One compiled unit, from this run's compile or from the cache: where its artifacts are and what they hold.

    `context` is what the plan and the compile worker say of the unit that is not read from the compiler's
    output (a Triton variant's identity and options; a CUDA file's place in the project)."""

    key: str  # the unit's compile key: its record's and its artifacts folder's name
    folder: Path
    language: str  # "triton" | "cuda"
    target: str
    hashes: dict[str, str]  # artifact name -> content hash
    context: dict[str, Any]
    dynamic_smem: int = 0
    sass_symbols: tuple[str, ...] | None = None
    cubin: tuple[str, str | None] = ("", None)  # path, the hash it was written with
    entry_smem: dict[str, int] = field(default_factory=dict)  # per entry, where it differs (`Artifacts.entry_smem`)
    # Triton: where the kernel's file's top-level definitions were when it was compiled and are now, and the
    # kernel's `def` line now (None where its definition is not in that file), to move the facts' lines.
    spans_then: dict[str, tuple[int, int]] = field(default_factory=dict)
    spans_now: dict[str, tuple[int, int]] = field(default_factory=dict)
    source_file: Path | None = None
    def_line: int | None = None
    # What a failure to read facts from it is reported as: (kernel, variant name, path, line).
    origin: tuple[str, str, str, int] = ("", "", "", 1)
    # CUDA: the project's PDL launch sites (`kgate.collect.cuda_launches`), which make some of its kernels PDL.
    launch_sites: tuple[LaunchSite, ...] = ()

    def artifacts(self) -> Artifacts | None:
        """The artifacts as they were written, or None where one is missing or damaged (compile again)."""
        texts: dict[str, str | None] = {}
        for name, digest in self.hashes.items():
            texts[name] = read_text(self.folder, name, digest)
            if texts[name] is None:
                return None
        if "ptx" not in texts or "ptxas_log" not in texts:
            return None
        return Artifacts(ptx=texts["ptx"] or "", ptxas_log=texts["ptxas_log"] or "", ttgir=texts.get("ttgir") or "",
                         sass=texts.get("sass"), sass_symbols=self.sass_symbols, dynamic_smem=self.dynamic_smem,
                         cubin=self.cubin, entry_smem=dict(self.entry_smem))


@dataclass(frozen=True)
class CompileFailure:
    """A kernel variant that did not compile: reported as a finding, not a crash."""

    kernel: str
    variant: str
    target: str
    path: str
    line: int
    message: str
    # What went wrong: "compile", its compile failed; "stale", captured specialisations that no longer fit their kernel
    # (not compiled). The rules stage reports each kind under a rule of its own.
    kind: str = "compile"
    # Other places: the registration or capture of a kernel whose module raised in another project file.
    related: tuple[Related, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CompileFailure:
        """From `to_json`'s object (related places as JSON objects); TypeError or ValueError for another shape."""
        return cls(**{**data, "related": tuple(Related.from_record(r) for r in data.get("related", ()))})
