"""kgate's Python API: the gate, the source rules and a kernel's compile as functions returning typed results.

    from kgate import api

    result = api.lint(project="path/to/repo")  # LintResult: findings of the source rules
    result = api.check(project="path/to/repo", targets=["sm_120a"])  # CheckResult: findings and kernel facts
    facts = api.compile_kernel(my_kernel, signature={"x": "*fp16"}, constexprs={"BLOCK": 1024})

These are the command line's own paths (`kgate lint` and `kgate check` render what they produce), so a
result holds what `--format json` writes, as frozen dataclasses. Importing `kgate.api` loads neither
Triton nor torch; a check or a compile runs the compiler in worker processes. See docs/api.md.
"""

from __future__ import annotations

from kgate.api.gate import check
from kgate.api.kernel import CompileError, compile_kernel, compile_variants
from kgate.api.results import CheckResult, Difference, Finding, KernelFacts, LintResult, Place, Severity
from kgate.api.source import lint
from kgate.core.errors import KgateError

__all__ = [
    "CheckResult",
    "CompileError",
    "Difference",
    "Finding",
    "KernelFacts",
    "KgateError",
    "LintResult",
    "Place",
    "Severity",
    "check",
    "compile_kernel",
    "compile_variants",
    "lint",
]
