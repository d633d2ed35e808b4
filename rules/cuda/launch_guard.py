"""## What it does
Flags a kernel launch with no error check after it: a `<<<...>>>` launch not
followed within a few lines (option `window`, default 3) by
`cudaGetLastError()`, `cudaPeekAtLastError()` or one of the project's check
macros (option `check_macros`), and a `cudaLaunchKernelEx` call whose
returned error is dropped (not wrapped in a check macro, assigned, compared
or returned). Launches in comments and string literals are not launches.
Launches written inside a `#define` cannot be judged without expanding the
macro: they are counted, and the count is reported once per file as a note
instead of being guessed at.

## Why is this bad?
A launch returns nothing and fails quietly: a grid or block size out of
range, too much dynamic shared memory for the card (99 KB on an RTX 5090,
not an H100's 227 KB), a missing kernel image for the architecture. The
error stays pending until some later, unrelated CUDA call reports it, or
never, and the output buffer simply keeps its old contents.

## Example
```cuda
rmsnorm_kernel<<<rows, 256, 0, stream>>>(x, w, out, cols);
return out;
```

## Use instead
```cuda
rmsnorm_kernel<<<rows, 256, 0, stream>>>(x, w, out, cols);
C10_CUDA_KERNEL_LAUNCH_CHECK();
```
or `CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));`.

## Options
- `check_macros` (list of strings, default `["CUDA_CHECK", "C10_CUDA_KERNEL_LAUNCH_CHECK"]`):
  names that count as an error check besides `cudaGetLastError` and
  `cudaPeekAtLastError`.
- `window` (integer, default 3): lines after the launch's `;` in which the
  check must appear.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from typing import Any

from kgate.collect.cpp_text import Scopes, balanced, blanked, macro_lines
from kgate.core.findings import Severity
from kgate.core.rule import Option, Report, Rule, SourceContext

_TRIPLE = re.compile(r"<<<")
_LAUNCH_EX = re.compile(r"\bcudaLaunchKernelExC?\s*(?:<[^;()]*>\s*)?\(")
_RUNTIME_CHECKS = ("cudaGetLastError", "cudaPeekAtLastError")
_NEWLINE = re.compile(r"\n")


def check(source: Any, ctx: SourceContext) -> Iterable[Report]:
    code = blanked(source).code
    in_macro = macro_lines(code)
    checks = re.compile(r"\b(?:" + "|".join(re.escape(n) for n in (*_RUNTIME_CHECKS, *ctx.options["check_macros"]))
                        + r")\b")
    starts = _line_starts(code)
    scopes = Scopes(code)
    skipped: list[int] = []
    for start, end, what in sorted(_launches(code)):  # in order: the scope scan continues from the last one
        line = bisect_right(starts, start, 1) - 1
        if line in in_macro:
            skipped.append(line)
            continue
        if what == "<<<":
            semicolon = code.find(";", end)
            semicolon = end if semicolon < 0 else semicolon
            last = bisect_right(starts, semicolon, 1) - 1 + ctx.options["window"]
            limit = starts[last] if last < len(starts) else len(code)
            if checks.search(code, semicolon, limit):
                continue
            message = (f"kernel launch without an error check within {ctx.options['window']} line(s): add "
                       f"cudaGetLastError() or a check macro after it")
        else:
            if _result_used(code, start, checks):
                continue
            message = "the error cudaLaunchKernelEx returns is dropped: check it (e.g. CUDA_CHECK(...))"
        name = _launched_name(code, start, what)
        yield Report(message, line=line, col=_column(code, start) + 1,
                     scope=scopes.function_at(start), discriminator=name)
    if skipped:
        yield Report(f"{len(skipped)} kernel launch(es) inside #define macros not checked (out of scope: a macro "
                     f"is not expanded)", severity=Severity.NOTE, line=min(skipped), discriminator="macros")


def _launches(code: str) -> Iterator[tuple[int, int, str]]:
    """(start, end of the statement, kind) of each launch in blanked code."""
    for match in _TRIPLE.finditer(code):
        close = code.find(">>>", match.end())
        if close < 0:
            continue
        paren = code.find("(", close + 3)
        if paren < 0 or code[close + 3:paren].strip():
            continue
        end = balanced(code, paren)
        start = _name_start(code, match.start())
        yield start, end, "<<<"
    for match in _LAUNCH_EX.finditer(code):
        end = balanced(code, match.end() - 1)
        yield match.start(), end, "ex"


def _name_start(code: str, triple: int) -> int:
    """Start of the launched expression before `<<<` (`ns::kernel<T, 4>`)."""
    index = triple
    depth = 0
    while index > 0:
        ch = code[index - 1]
        if ch == ">":
            depth += 1
        elif ch == "<":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and not (ch.isalnum() or ch in "_:"):
            break
        index -= 1
    return index


def _launched_name(code: str, start: int, what: str) -> str:
    if what == "<<<":
        return " ".join(code[start:code.find("<<<", start)].split())
    args = code[code.find("(", start) + 1:balanced(code, code.find("(", start)) - 1].split(",")
    return " ".join(args[1].split()) if len(args) > 1 else "cudaLaunchKernelEx"


def _result_used(code: str, start: int, checks: re.Pattern[str]) -> bool:
    """Whether a cudaLaunchKernelEx call's result is checked, kept or returned rather than dropped.

    The statement's text before the call decides: nothing (or a `(void)` cast) drops the
    error; a check macro, an assignment, a comparison, a condition or a `return` keeps it.
    """
    head = max(code.rfind(";", 0, start), code.rfind("{", 0, start), code.rfind("}", 0, start)) + 1
    before = " ".join(code[head:start].split())
    return before not in ("", "(void)", "static_cast<void>(") or bool(checks.search(before))


def _line_starts(code: str) -> list[int]:
    """Offset of the start of each line, 1-based: starts[n] is where line n begins."""
    return [0, 0, *(match.end() for match in _NEWLINE.finditer(code))]


def _column(code: str, offset: int) -> int:
    return offset - (code.rfind("\n", 0, offset) + 1)


RULE = Rule(
    code="KG302",
    name="launch-guard",
    layer="cuda",
    severity=Severity.ERROR,
    summary="A kernel launch with no error check after it",
    check=check,
    doc=__doc__ or "",
    options={
        "check_macros": Option(["CUDA_CHECK", "C10_CUDA_KERNEL_LAUNCH_CHECK"],
                               "names that count as an error check", list, str),
        "window": Option(3, "lines after the launch in which the check must appear", int, minimum=0),
    },
    files=("*.cu", "*.cuh", "*.cpp", "*.cc", "*.cxx", "*.h", "*.hpp"),
    prefilter=(b"<<<", b"cudaLaunchKernelEx"),
)
