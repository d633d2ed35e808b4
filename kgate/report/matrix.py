"""The version matrix (`kgate check --triton VERSION`, `--cute-dsl VERSION`): the same kernels under several releases of
the compiler of their language (Triton, the CuTe DSL).

Rows are kernel variants and targets; for each release, the figures a compiler decides (registers, spill
bytes, shared memory) and whether the MMA is block-scaled. A row is shown when any of them differs between
releases, or when a variant exists under one release and not another (a launcher that specialises
differently names its variants differently). Then one summary line per release: variants compiled, changed,
block-scaled MMA lost or gained, failing findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kgate.report.table import aligned

Row = dict[str, Any]  # a `kernels[]` record of `kgate check --format json`


def _key(row: Row) -> tuple[str, str, str]:
    return (row["kernel"], row["variant"], row["target"])


def _block_scaled(row: Row) -> bool:
    return any("block_scale" in op for op in row.get("instructions", {}))


def _mma(row: Row) -> str:
    ops = row.get("instructions", {})
    if not ops:
        return "-"
    return "block-scaled" if _block_scaled(row) else "plain"


def _figures(row: Row | None, only: int | None = None) -> Any:
    """(registers, spill bytes, shared memory, MMA) of a row, or one of them; None where the row is missing."""
    if row is None:
        return None
    figures = (row["registers"], row["spill_bytes"], row["smem_bytes"], _mma(row))
    return figures if only is None else figures[only]


@dataclass
class Release:
    version: str
    rows: dict[tuple[str, str, str], Row]
    failing: int  # failing findings (errors) of compiled rules and compile errors under this release
    seconds: float | None = None  # None: this environment's own run
    compile_errors: tuple[str, ...] = ()  # what its compiles that failed said, each message once


@dataclass
class Matrix:
    releases: list[Release]  # the first is this environment's
    changed: list[tuple[str, str, str]] = field(default_factory=list)
    label: str = "Triton"  # the compiler whose releases these are

    def compare(self) -> Matrix:
        keys = sorted({k for r in self.releases for k in r.rows})
        self.changed = [k for k in keys if len({_figures(r.rows.get(k)) for r in self.releases}) > 1]
        return self


def matrix(current_version: str, current: list[Row], current_failing: int, others: list[Release], *,
           label: str = "Triton", language: str = "triton") -> Matrix:
    """The comparison of this environment's rows of `language` with each other release's (`label`: the compiler)."""
    here = Release(current_version, {_key(r): r for r in current if r["language"] == language}, current_failing)
    return Matrix([here, *others], label=label).compare()


def failing_of(findings: list[dict[str, Any]]) -> int:
    """Errors of compiled rules, and every compile error: one before any target (a kernel its release cannot import or
    describe) fails the release as one for a target does."""
    return sum(1 for f in findings if f["severity"] == "error" and f.get("kernel")
               and (f.get("target") or f.get("name") == "compile-error"))


def compile_errors_of(findings: list[dict[str, Any]]) -> tuple[str, ...]:
    """The messages of a release's compile errors (`compile-error`), each once, in order."""
    return tuple(dict.fromkeys(f["message"] for f in findings if f.get("name") == "compile-error"))


def render(m: Matrix) -> list[str]:
    versions = [r.version for r in m.releases]
    lines = [f"{m.label} matrix: {' | '.join(versions)} (the first is this environment's)"]
    if m.changed:
        from kgate.report.terminal import short_variants

        header = ("kernel", "variant", "target", "regs", "spill", "smem", "mma")
        rows: list[tuple[str, ...]] = [header]
        shown = short_variants(m.changed)
        # MMA changes first (block-scaled lost or gained), then by kernel.
        ordered = sorted(m.changed, key=lambda k: (len({_figures(r.rows.get(k), 3) for r in m.releases}) == 1, k))
        for key in ordered:
            cells = [_figures(r.rows.get(key)) for r in m.releases]

            def column(i: int, cells: list[tuple[Any, ...] | None] = cells) -> str:
                return " | ".join("-" if c is None else str(c[i]) for c in cells)

            rows.append((key[0], shown[key], key[2], column(0), column(1), column(2), column(3)))
        lines += aligned(rows, set())
    else:
        lines.append("every kernel variant compiled to the same registers, spills, shared memory and MMA")
    here = m.releases[0]
    for release in m.releases[1:]:
        keys = set(here.rows) | set(release.rows)
        differs = [k for k in keys if _figures(here.rows.get(k)) != _figures(release.rows.get(k))]
        lost = sum(1 for k in keys if k in here.rows and k in release.rows and _block_scaled(here.rows[k])
                   and not _block_scaled(release.rows[k]))
        gained = sum(1 for k in keys if k in here.rows and k in release.rows and not _block_scaled(here.rows[k])
                     and _block_scaled(release.rows[k]))
        timing = f" in {release.seconds:.1f} s" if release.seconds is not None else ""
        lines.append(f"{m.label} {release.version}: {len(release.rows)} variant(s) compiled{timing}; {len(differs)} "
                     f"differ from {here.version}; block-scaled MMA lost in {lost}, gained in {gained}; "
                     f"{release.failing} failing finding(s)")
        if release.compile_errors:  # why kernels are missing under it: the first of what its compiler said
            more = f" (and {len(release.compile_errors) - 1} other message(s))" if len(release.compile_errors) > 1 else ""
            lines.append(f"{m.label} {release.version}: a compile failed: {release.compile_errors[0]}{more}")
    return lines


def to_json(m: Matrix) -> dict[str, Any]:
    return {
        "compiler": m.label,
        "versions": [r.version for r in m.releases],
        "failing": {r.version: r.failing for r in m.releases},
        "changed": [
            {"kernel": k[0], "variant": k[1], "target": k[2],
             "by_version": {r.version: None if _figures(r.rows.get(k)) is None else dict(zip(
                 ("registers", "spill_bytes", "smem_bytes", "mma"), _figures(r.rows.get(k)) or ()))
                 for r in m.releases}}
            for k in m.changed],
    }
