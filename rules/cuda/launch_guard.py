"""## What it does
Flags a kernel launch with no error check after it: a `<<<...>>>` launch not
followed within a few lines (option `window`, default 3) by
`cudaGetLastError()`, `cudaPeekAtLastError()`, a call whose name says it
reads the last error (a project's wrapper such as `BNB_PEEK_LAST_ERROR()` or
`getLastCudaError(...)`, defined in a header this file cannot see) or one of
the project's check macros (option `check_macros`), and a `cudaLaunchKernelEx`
call whose returned error is dropped (not wrapped in a check macro, assigned,
compared or returned) and not read back by a last-error query after it (the
runtime queries, such a wrapper, or a check macro called without arguments
like `C10_CUDA_KERNEL_LAUNCH_CHECK()`). Launches in comments and string
literals are not launches.

A launch in one arm of an if/else chain, in a case of a `switch` or in a
loop's body is checked by a check within `window` lines after the whole
chain, switch or loop (a `break` leads there too), however long the other
arms are:

```cuda
if (blocksize == 4096)
  quantize<4096><<<blocks, 1024>>>(x);
else if (blocksize == 2048)
  quantize<2048><<<blocks, 512>>>(x);
CUDA_CHECK(cudaPeekAtLastError());
```
Launches written inside a `#define` cannot be judged without expanding the
macro: they are counted, and the count is reported once per file as a note
instead of being guessed at.

A launch that has no check after it inside a lambda or a helper is followed
to the calls of that lambda or helper, where the check usually is:

```cuda
auto launch = [&](auto tag) { rmsnorm_kernel<decltype(tag)><<<rows, 256, 0, stream>>>(...); };
launch(float{});
CUDA_CHECK(cudaGetLastError());
```

- A named lambda (`auto launch = [&](...) {...};`, or one assigned to a
  `std::function`) is checked when every direct call of it in the rest of
  its block is. A call without arguments after a checked call of the same
  lambda launches the same again (a warm-up or timing loop) and is covered
  by that check.
- A lambda written where it runs (an argument, `dispatch(kind, [&] {...});`,
  or called on the spot, `[&] {...}();`) is checked by a check within
  `window` lines after the statement that holds it.
- A function that only this file can call (`static`, `inline`, or in an
  anonymous namespace, not a member) is checked when every call of it in the
  file is.
- A function other files may call (not a member, not `static`), and an
  `inline` function of a header that the header never calls, is checked
  when every call of it in the project's C++/CUDA files is. Calls in other
  files are judged where they are and not followed further.
- A call is checked by a check within `window` lines after it, after the
  control statements that hold it, or later in the calling function on
  every path (in the call's block or one around it, not in another branch,
  with no `return` or `throw` before it): one read of the last error reports
  every launch since the previous read. A call is followed outwards in turn
  (a helper called from a lambda called from a helper), up to four steps.

A macro the project defines whose expansion reads the last error
(`#define CHECK_KERNEL_LAUNCH() CHECK(cudaGetLastError())`, in any of its
files) counts as a check, as the `check_macros` do.

Where some calls check and others in the same file do not, each call
without a check is reported, naming the lambda or helper and the kernel it
launches: that is where the check goes. Where no call checks, or the calls
without one are in other files, the launch is reported once, with each such
call as a related place (a helper dispatched from eight `switch` cases
missing one check is one finding, not eight). The launch itself is reported,
as before, when the lambda or helper cannot be followed: a member function,
a function nothing in the project calls (an entry point called from Python),
a lambda that is only passed on (to a timing loop, say) and never called
directly, or a call written inside a macro. The reading is textual (braces
matched on the code with comments and strings blanked), so a function
defined through a macro or split by `#if` branches may not be recognised.
Because the verdict reads other files, it is never answered from the lint
cache.

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

## Fix
Unsafe (`kgate lint --fix --unsafe-fixes`): inserts a call of the first of
`check_macros` that this file can use on the line after the launch (or
after the unchecked call of the helper): `C10_CUDA_KERNEL_LAUNCH_CHECK();`,
or `CUDA_CHECK(cudaGetLastError());` for a macro that takes the call to
check. A macro counts as usable when the file defines it (`#define`),
already calls it, or includes a header that brings it (for
`C10_CUDA_KERNEL_LAUNCH_CHECK`: `c10/cuda/CUDAException.h`, which
`c10/cuda/CUDAFunctions.h`, `CUDAStream.h`, `CUDAGuard.h`,
`ATen/cuda/Exceptions.h` and `ATen/cuda/CUDAContext.h` include); a file
with none of them gets no fix. A macro whose definition returns (a
`cudaError_t`, as FlashInfer's `FLASHINFER_CUDA_CALL` does) or that the
file only calls is inserted only into a function that already calls it, so
the result compiles where the macro did. A launch that is the whole body of
a braceless `if`, `else` or loop gets no fix either. Unsafe because the check changes what
happens when the launch fails: the macro throws or aborts where the error
was dropped before.
"""

from __future__ import annotations

import dataclasses
import os
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from kgate.collect.cpp_text import Scopes, balanced, blanked, calls_of, macro_lines
from kgate.core.findings import Related, Severity
from kgate.core.fix import Applicability, Edit, Fix
from kgate.core.rule import READS_BEYOND, Option, Report, Rule, SourceContext

_TRIPLE = re.compile(r"<<<")
_LAUNCH_EX = re.compile(r"\bcudaLaunchKernelExC?\s*(?:<[^;()]*>\s*)?\(")
_RUNTIME_CHECKS = ("cudaGetLastError", "cudaPeekAtLastError")
_NEWLINE = re.compile(r"\n")
# A project's wrapper of the runtime's last-error query, by its name: BNB_PEEK_LAST_ERROR(), getLastCudaError(...),
# hipGetLastError(). Only a call counts, not a variable of that name.
_LAST_ERROR_CALL = r"\b\w*(?:Last(?:Cuda)?Error|LAST_(?:CUDA_)?ERROR)\w*\s*\("


def check(source: Any, ctx: SourceContext) -> Iterable[Report]:
    code = blanked(source).code
    in_macro = macro_lines(code)
    checks = re.compile(r"\b(?:" + "|".join(re.escape(n) for n in (*_RUNTIME_CHECKS, *ctx.options["check_macros"]))
                        + r")\b|" + _LAST_ERROR_CALL)
    # A dropped cudaLaunchKernelEx error is only read back by a query of the last error, not by a check
    # macro wrapped around another call: the runtime queries, a wrapper named for them, or a macro
    # called without arguments (C10_CUDA_KERNEL_LAUNCH_CHECK()).
    reads = re.compile(r"\b(?:" + "|".join(re.escape(n) for n in _RUNTIME_CHECKS) + r")\b|" + _LAST_ERROR_CALL
                       + "".join(r"|\b" + re.escape(n) + r"\s*\(\s*\)" for n in ctx.options["check_macros"]))
    window = ctx.options["window"]
    starts = _line_starts(code)
    flow: _Flow | None = None
    callers: dict[str, _Callers] = {}
    project: _Project | None = None
    skipped: list[int] = []
    found: dict[int, Report] = {}  # by offset: several launches may reach the same unchecked call
    ends: dict[int, int] = {}  # by offset: the end of the statement a check goes after
    for start, end, what in sorted(_launches(code)):
        line = bisect_right(starts, start, 1) - 1
        if line in in_macro:
            skipped.append(line)
            continue
        name = _launched_name(code, start, what)
        if what == "ex" and _result_used(code, start, checks):
            continue
        semicolon = code.find(";", end)
        semicolon = end if semicolon < 0 else semicolon
        wanted = checks if what == "<<<" else reads
        if _checked_after(code, semicolon, starts, wanted, window):
            continue
        if project is None:
            # The project's own macros that read the last error (`#define CHECK_LAUNCH() CHECK(cudaGetLastError())`)
            # count as checks: read once per file, on the first launch the file's own text does not settle.
            project = _project(source, ctx)
            source.derived[READS_BEYOND] = True
            extra = project.last_error_macros() - set(ctx.options["check_macros"])
            if extra:
                names = "|".join(re.escape(n) for n in sorted(extra))
                checks = re.compile(checks.pattern + r"|\b(?:" + names + r")\b")
                reads = re.compile(reads.pattern + r"|\b(?:" + names + r")\b")
                wanted = checks if what == "<<<" else reads
                if _checked_after(code, semicolon, starts, wanted, window):
                    continue
        flow = flow or _Flow(code, starts, window)
        if flow.checked(semicolon, wanted):
            continue
        follow = callers.setdefault(what, _Callers(flow, in_macro, wanted, project, source.rel))
        reach = follow.unchecked_calls(start, semicolon)
        if reach is not None and not reach[0]:
            continue  # every call of the lambda or helper that performs it is checked
        if reach is not None:
            sites, checked = reach
            if checked and all(not site.path for site in sites):
                # Some callers check and these do not: each is where a check goes.
                for site in sites:
                    found.setdefault(site.offset, _call_report(code, starts, site.offset, site.callee, name, window))
                    ends.setdefault(site.offset, _statement_end(code, site.offset))
                continue
            # No caller checks (or the unchecked ones are in other files): one finding, at the launch, where the
            # fix puts the check (after the launch's statement, inside the lambda or helper).
            found.setdefault(start, _unchecked_everywhere(code, starts, start, line, name, sites, checked,
                                                             source.rel))
            ends.setdefault(start, semicolon)
            continue
        if what == "<<<":
            message = (f"kernel launch without an error check within {window} line(s): add "
                       f"cudaGetLastError() or a check macro after it")
        else:
            message = "the error cudaLaunchKernelEx returns is dropped: check it (e.g. CUDA_CHECK(...))"
        found.setdefault(start, Report(message, line=line, col=_column(code, start) + 1, discriminator=name))
        ends.setdefault(start, semicolon)
    scopes = Scopes(code)
    guards = _usable_checks(source.text, code, ctx.options["check_macros"]) if found else []
    for offset in sorted(found):  # in order: the scope scan continues from the last one
        guard = _guard_at(code, offset, guards)
        fix = _insert_check(source, code, starts, offset, ends.get(offset, -1), guard) if guard else None
        yield dataclasses.replace(found[offset], scope=scopes.function_at(offset), fix=fix)
    if skipped:
        yield Report(f"{len(skipped)} kernel launch(es) inside #define macros not checked (out of scope: a macro "
                     f"is not expanded)", severity=Severity.NOTE, line=min(skipped), discriminator="macros")


# Headers that bring a check macro, for the fix: a file that includes one may call it. PyTorch's headers (2.x) define
# C10_CUDA_KERNEL_LAUNCH_CHECK in c10/cuda/CUDAException.h, which the others include on the way.
_DEFINED_IN = {"C10_CUDA_KERNEL_LAUNCH_CHECK": ("c10/cuda/CUDAException.h", "c10/cuda/CUDAFunctions.h",
                                                "c10/cuda/CUDAStream.h", "c10/cuda/CUDAGuard.h",
                                                "ATen/cuda/Exceptions.h", "ATen/cuda/CUDAContext.h")}
_NO_ARGUMENT = frozenset({"C10_CUDA_KERNEL_LAUNCH_CHECK"})


class _Guard(NamedTuple):
    name: str
    statement: str  # what the fix inserts
    # Only where the function already calls it: a macro whose definition returns (a `cudaError_t`, say) or that
    # is known only from its calls may not compile in every function.
    same_function: bool


def _usable_checks(text: str, code: str, macros: list[str]) -> list[_Guard]:
    """The configured check macros this file can call, in the configured order: those it defines, calls, or
    includes a header of."""
    out = []
    for name in macros:
        escaped = re.escape(name)
        # Each search below needs the macro's name or one of its headers in the text: a plain substring test
        # first spares the line-anchored searches of a large file (a generated 50 MB one) that names neither.
        named = name in text
        headers = [h for h in _DEFINED_IN.get(name, ()) if h in text]
        if not named and not headers:
            continue
        define = re.search(r"^[ \t]*#[ \t]*define[ \t]+" + escaped + r"(\([^)]*\))?((?:[^\n]*\\\n)*[^\n]*)", text,
                           re.MULTILINE) if named else None
        if define is not None:
            params = define.group(1)
            statement = f"{name};" if params is None else f"{name}();" if not params.strip("() \t") \
                else f"{name}(cudaGetLastError());"
            out.append(_Guard(name, statement, bool(re.search(r"\breturn\b", define.group(2)))))
            continue
        calls = [m.group(1) for m in re.finditer(r"\b" + escaped + r"\s*\(([^;]*?)\)", code)] if named else []
        if any(re.search(r"^[ \t]*#[ \t]*include[ \t]*[<\"]" + re.escape(h) + r"[>\"]", text, re.MULTILINE)
               for h in headers):
            out.append(_Guard(name, f"{name}();" if name in _NO_ARGUMENT else f"{name}(cudaGetLastError());", False))
        elif calls:
            statement = f"{name}();" if any(not c.strip() for c in calls) else f"{name}(cudaGetLastError());"
            out.append(_Guard(name, statement, True))
    return out


def _guard_at(code: str, at: int, guards: list[_Guard]) -> str | None:
    """The statement to insert after the launch at `at`: the first usable macro that may be called there."""
    body: tuple[int, int] | None = None
    for guard in guards:
        if not guard.same_function:
            return guard.statement
        body = body or _function_body(code, at)
        if body[1] > body[0] and re.search(r"\b" + re.escape(guard.name) + r"\s*\(", code[body[0]:body[1]]):
            return guard.statement
    return None


def _function_body(code: str, at: int) -> tuple[int, int]:
    """(start, end) of the outermost block around `at` that is not a namespace, class or `extern "C"`: the body
    of the function that holds it; (0, 0) at namespace scope."""
    found = (0, 0)
    opens: list[int] = []
    for match in re.finditer(r"[{}]", code[:at]):
        if match.group() == "{":
            opens.append(match.start())
        elif opens:
            opens.pop()
    for opening in opens:
        if not _SCOPE_HEAD.search(code, max(0, opening - 200), opening):
            found = (opening, balanced(code, opening, "{", "}"))
            break
    return found


def _statement_end(code: str, call: int) -> int:
    """Offset of the `;` that ends the statement of a call at `call`, -1 if none."""
    paren = code.find("(", call)
    return code.find(";", balanced(code, paren)) if paren >= 0 else -1


def _insert_check(source: Any, code: str, starts: list[int], at: int, semicolon: int, guard: str) -> Fix | None:
    """The fix that puts `guard` right after the statement: on a line of its own, indented as the statement, or
    after the `;` when more code follows it on that line."""
    if semicolon < 0 or semicolon >= len(code) or code[semicolon] != ";":
        return None
    if _braceless_body(code, at):
        return None  # a second statement would fall out of the if/else or the loop: left for a person
    line = bisect_right(starts, semicolon, 1) - 1
    first = bisect_right(starts, at, 1) - 1
    raw = source.line_text(line)
    indent = re.match(r"[ \t]*", source.line_text(first))
    after = code[semicolon + 1:starts[line + 1] if line + 1 < len(starts) else len(code)]
    if after.strip():
        column = _column(code, semicolon) + 1
        edit = Edit.insert(line, column, f" {guard}")
    else:
        newline = "\r\n" if "\r\n" in source.text else "\n"
        edit = Edit.insert(line, len(raw), f"{newline}{indent.group() if indent else ''}{guard}")
    return Fix(f"insert `{guard}` after the launch: a failed launch then stops the program where it happened",
               Applicability.UNSAFE, (edit,))


def _braceless_body(code: str, at: int) -> bool:
    """Whether the statement starting at `at` is the whole body of an if, else, loop or do without braces."""
    head = max(code.rfind(";", 0, at), code.rfind("{", 0, at), code.rfind("}", 0, at)) + 1
    before = code[head:at].strip()
    if not before:
        return False
    if re.search(r"\b(?:else|do)$", before):
        return True
    if before.endswith(")"):
        depth = 0
        for index in range(len(before) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(before[index], 0)
            if depth == 0:
                return bool(re.search(r"\b(?:if|for|while|switch)\s*(?:constexpr\s*)?$", before[:index]))
    return False


def _checked_after(code: str, semicolon: int, starts: list[int], checks: re.Pattern[str], window: int) -> bool:
    """Whether a check appears between a statement's `;` and the end of the `window`-th line after it."""
    last = bisect_right(starts, semicolon, 1) - 1 + window
    limit = starts[last] if last < len(starts) else len(code)
    return bool(checks.search(code, semicolon, limit))


def _unchecked_everywhere(code: str, starts: list[int], start: int, line: int, kernel: str, sites: list[_Site],
                         checked: int, rel: str) -> Report:
    sites = sorted(set(sites))  # several paths may end at the same call
    callees = sorted({site.callee for site in sites})
    related = tuple(Related(site.path or rel, site.line or bisect_right(starts, site.offset, 1) - 1,
                            f"call of `{site.callee}` with no error check after it") for site in sites)
    through = ", ".join(f"`{c}`" for c in callees)
    calls = (f"{len(sites)} of its calls through {through} do not check after the call either" if checked else
             f"none of its {len(sites)} call(s) through {through} checks after the call either")
    return Report(f"kernel launch without an error check, and {calls}: add cudaGetLastError() or a check macro "
                  f"after the launch", line=line, col=_column(code, start) + 1, discriminator=kernel,
                  related=tuple(sorted(set(related), key=lambda r: (r.path, r.line))))


def _call_report(code: str, starts: list[int], site: int, callee: str, kernel: str, window: int) -> Report:
    launched = f"launches `{kernel}`" if kernel else "launches a kernel"
    return Report(f"`{callee}` {launched} and this call of it has no error check within {window} line(s): add "
                  f"cudaGetLastError() or a check macro after the call",
                  line=bisect_right(starts, site, 1) - 1, col=_column(code, site) + 1, discriminator=callee)


_ELSE = re.compile(r"else\b")
_RETURN = re.compile(r"\b(?:return|throw|co_return)\b")
_BREAK = re.compile(r"break\s*;")
_CONTROL_HEAD = re.compile(r"(if|for|while|switch)\b\s*(?:constexpr\b\s*)?\(")
_DO = re.compile(r"do\b")
_WORD_BEFORE = re.compile(r"(\w+)\s*$")
_OUTWARD = 8  # control statements left, one inside another, to reach a check


class _Flow:
    """Where a statement's error check may be: after it, or after the control statements that hold it.

    A launch in one arm of an if/else chain, in a switch's case or in a loop's body is checked by a check
    right after the whole if/else chain, switch or loop (`break` leaves a switch or a loop the same way).
    The reading follows the braces of the blanked text and the C++ grammar of those statements, not a
    parse: it stops at the body of a function or a lambda, where the callers take over.
    """

    def __init__(self, code: str, starts: list[int], window: int) -> None:
        self.code, self.starts, self.window = code, starts, window
        self.opens: list[int] = []
        self.closes: list[int] = []
        self.parents: list[int] = []
        self.at_open: dict[int, int] = {}
        self.at_close: dict[int, int] = {}
        stack: list[int] = []
        for match in re.finditer(r"[{}]", code):
            if match.group() == "{":
                self.parents.append(stack[-1] if stack else -1)
                stack.append(len(self.opens))
                self.at_open[match.start()] = len(self.opens)
                self.opens.append(match.start())
                self.closes.append(len(code))
            elif stack:
                brace = stack.pop()
                self.closes[brace] = match.start()
                self.at_close[match.start()] = brace

    def checked(self, end: int, checks: re.Pattern[str]) -> bool:
        """Whether a check follows the statement whose last character (`;` or `}`) is at `end` within
        `window` lines, directly or after the if/else chains, switches and loops that hold it."""
        position: int | None = end
        for _ in range(_OUTWARD):
            if position is None:
                return False
            if _checked_after(self.code, position, self.starts, checks, self.window):
                return True
            position = self._leave(position + 1)
        return False

    def later(self, end: int, checks: re.Pattern[str]) -> bool:
        """Whether a check comes later in the function (or lambda) that holds the statement ending at `end`, on
        every path: in that block or one around it (not in another branch), with no `return` or `throw` before
        it. A read of the last error reports every launch since the previous read."""
        brace = self._around(end)
        around: set[int] = set()
        while brace >= 0:
            around.add(brace)
            if self._kind(brace) == "other":
                break
            brace = self.parents[brace]
        close = self.closes[brace] if brace >= 0 else len(self.code)
        for found in checks.finditer(self.code, end, close):
            if self._around(found.start()) in around or (brace < 0 and self._around(found.start()) < 0):
                return _RETURN.search(self.code, end, found.start()) is None
        return False

    def _around(self, at: int) -> int:
        """The innermost block that holds offset `at`, -1 for none."""
        brace = bisect_right(self.opens, at) - 1
        while brace >= 0 and self.closes[brace] < at:
            brace = self.parents[brace]
        return brace

    def _leave(self, after: int) -> int | None:
        """The last character of the statement that control reaches the end of after a statement that
        ends before `after`; None when what follows is another statement or the end of a function."""
        at = self._next(after)
        if at >= len(self.code):
            return None
        if _ELSE.match(self.code, at):
            return self._skip(at + 4) - 1
        if _BREAK.match(self.code, at):
            brace = bisect_right(self.opens, at) - 1
            while brace >= 0 and self.closes[brace] < at:
                brace = self.parents[brace]
            while brace >= 0:
                kind = self._kind(brace)
                if kind in ("loop", "switch", "do"):
                    return self._end(brace)
                if kind == "other":
                    return None
                brace = self.parents[brace]
            return None
        if self.code[at] == "}" and at in self.at_close:
            return self._end(self.at_close[at])
        return None

    def _end(self, brace: int) -> int | None:
        """The last character of the statement whose body is the block `brace`, None for a function's."""
        kind = self._kind(brace)
        close = self.closes[brace]
        if kind == "if":
            at = self._next(close + 1)
            return self._skip(at + 4) - 1 if _ELSE.match(self.code, at) else close
        if kind == "do":
            paren = self.code.find("(", close)
            semicolon = self.code.find(";", balanced(self.code, paren)) if paren >= 0 else -1
            return semicolon if semicolon >= 0 else None
        return close if kind != "other" else None

    def _kind(self, brace: int) -> str:
        """What the block `brace` is the body of: "if", "loop", "switch", "do", "else", "block" (a bare or
        a case's block) or "other" (a function, a lambda, a class, an initializer)."""
        code = self.code
        before = _previous(code, self.opens[brace])
        if before < 0 or code[before] in ";{}:":
            return "block"
        if code[before] == ")":
            depth = 0
            for paren in range(before, max(-1, before - 4000), -1):
                depth += {")": 1, "(": -1}.get(code[paren], 0)
                if depth == 0:
                    break
            else:
                return "other"
            word = _WORD_BEFORE.search(code, max(0, paren - 40), paren)
            name = word.group(1) if word is not None else ""
            if name == "constexpr":
                word = _WORD_BEFORE.search(code, max(0, word.start() - 40), word.start())
                name = word.group(1) if word is not None else ""
            return {"if": "if", "for": "loop", "while": "loop", "switch": "switch"}.get(name, "other")
        word = _WORD_BEFORE.search(code, max(0, before - 10), before + 1)
        return {"else": "else", "do": "do"}.get(word.group(1) if word is not None else "", "other")

    def _skip(self, at: int) -> int:
        """Offset just past the statement that starts at or after `at`."""
        code = self.code
        at = self._next(at)
        if at >= len(code):
            return len(code)
        if code[at] == "{":
            brace = self.at_open.get(at)
            return self.closes[brace] + 1 if brace is not None else len(code)
        head = _CONTROL_HEAD.match(code, at)
        if head is not None:
            after = self._skip(balanced(code, head.end() - 1))
            if head.group(1) == "if":
                following = self._next(after)
                if _ELSE.match(code, following):
                    return self._skip(following + 4)
            return after
        if _DO.match(code, at):
            body = self._skip(at + 2)
            paren = code.find("(", body)
            semicolon = code.find(";", balanced(code, paren)) if paren >= 0 else -1
            return semicolon + 1 if semicolon >= 0 else len(code)
        depth = 0
        for index in range(at, len(code)):
            ch = code[index]
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
                if depth < 0:
                    return index
            elif ch == ";" and depth == 0:
                return index + 1
        return len(code)

    def _next(self, at: int) -> int:
        """Offset of the first character at or after `at` that is not white space."""
        while at < len(self.code) and self.code[at].isspace():
            at += 1
        return at


# What may stand between a head's `)` (or a lambda's `]`) and its body's `{`.
_SPECIFIERS = re.compile(r"(?:\b(?:const|noexcept|override|final|mutable|constexpr|consteval|static|__host__|__device__)"
                         r"|->[^{};()]*)\s*$")
_NAME_BEFORE = re.compile(r"(?:~\s*)?[A-Za-z_][\w:]*$")
_ATTRIBUTE_BEFORE = re.compile(r"\b(?:__host__|__device__|mutable)$")
_ASSIGNED = re.compile(r"(?<![\w.>])(\w+)\s*(?<![=!<>+\-*/%&|^])=\s*$")
_LOCAL_LINKAGE = re.compile(r"\b(?:static|inline|__forceinline__|__inline__)\b")
_CONTROL = frozenset({"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "constexpr", "consteval",
                      "requires"})
_NAMESPACE_HEAD = re.compile(r"\bnamespace\s*(?:\w[\w:]*\s*)?$|\bextern\s*\"\s*\"\s*$")
_SCOPE_HEAD = re.compile(r"\b(?:namespace|class|struct|union|enum)\b[^;{}()]*$|\bextern\s*\"\s*\"\s*$")
_DEPTH = 4  # lambdas and helpers followed outwards from one launch


class _Body(NamedTuple):
    """The body of a lambda or helper that holds a launch."""

    brace: int  # index of its `{` among the file's braces
    name: str  # what calls it; '' for a lambda that runs where it is written
    begin: int  # offset of its head (the lambda's `[`, the function's declaration)
    lambda_: bool
    exported: bool = False  # a function other files may call


class _Site(NamedTuple):
    """A call through which a launch reaches no check: in this file (`path` empty, at `offset`) or in another
    file of the project (`path` and `line`)."""

    path: str
    offset: int
    line: int
    callee: str


class _Callers:
    """Follows an unchecked launch out of the lambda or file-local helper that performs it.

    A launch inside a named lambda (`auto launch = [&](...) { ... };`) or inside a function that only
    this file can call (`static`, `inline`, an anonymous namespace) is checked when every call of it is:
    each call is held to the same rule as a launch, and followed outwards in turn. A lambda written as
    an argument (`dispatch(kind, [&] { ... });`) runs where it is written: the statement that holds it
    is. Braces are matched on the blanked text, so this is a reading of the code, not a parse.
    """

    def __init__(self, flow: _Flow, in_macro: frozenset[int], checks: re.Pattern[str],
                 project: _Project | None = None, rel: str = "") -> None:
        self.flow, self.code, self.starts, self.in_macro, self.checks = flow, flow.code, flow.starts, in_macro, checks
        self.opens, self.closes, self.parents = flow.opens, flow.closes, flow.parents
        self.project, self.rel = project, rel
        self._memo: dict[int, tuple[list[_Site], int] | None] = {}

    def unchecked_calls(self, at: int, semicolon: int, depth: int = 0,
                        seen: frozenset[int] = frozenset()) -> tuple[list[_Site], int] | None:
        """The calls through which the statement at `at` reaches no check, and how many calls on the way do
        check; ([], n) when every path is checked; None when the statement cannot be followed (not in a lambda
        or a function that is not a member, no call of it in sight, or too deep)."""
        if depth and (self.flow.checked(semicolon, self.checks) or self.flow.later(semicolon, self.checks)):
            return [], 1
        if depth >= _DEPTH:
            return None
        body = self._callable(at)
        if body is None or body.brace in seen:
            return None
        if not body.name:  # a lambda written where it runs: its statement goes on
            end = self.code.find(";", self.closes[body.brace])
            return self.unchecked_calls(body.begin, end if end >= 0 else len(self.code), depth + 1,
                                        seen | {body.brace})
        if body.brace in self._memo:  # many launches in one helper: its calls are followed once
            return self._memo[body.brace]
        calls = self._calls(body)
        elsewhere = self._calls_elsewhere(body) if calls is not None and (
            body.exported or (not calls and self.rel.endswith(_HEADERS))) else []
        out: tuple[list[_Site], int] | None = None
        if calls or elsewhere:
            sites: list[_Site] = []
            checked = 0
            repeated = False  # a lambda called again without arguments launches what a checked call launched
            for call, end in calls or ():
                bare = body.lambda_ and re.match(r"\s*\(\s*\)", self.code[self.code.find("(", call):]) is not None
                if bare and repeated:
                    checked += 1
                    continue
                inner = self.unchecked_calls(call, end, depth + 1, seen | {body.brace})
                if inner is None:
                    sites.append(_Site("", call, 0, body.name))
                else:
                    sites.extend(inner[0])
                    checked += inner[1]
                    repeated = repeated or (bare and not inner[0])
            for site in elsewhere:
                if site is None:
                    checked += 1
                else:
                    sites.append(site)
            out = (sites, checked)
        self._memo[body.brace] = out
        return out

    def _calls_elsewhere(self, body: _Body) -> list[_Site | None]:
        """The calls of a function in the project's other files: None for each that checks after it (within
        `window` lines, after the control statements that hold it, or later in its block), a site for each
        that does not. Those calls are not followed further."""
        if self.project is None or body.lambda_:
            return []
        out: list[_Site | None] = []
        for rel, flow, call, end in self.project.calls(body.name, self.rel):
            if flow.checked(end, self.checks) or flow.later(end, self.checks):
                out.append(None)
            else:
                out.append(_Site(rel, call, bisect_right(flow.starts, call, 1) - 1, body.name))
        return out

    def _callable(self, at: int) -> _Body | None:
        """The lambda or file-local function whose body holds `at`; None for anything else (a member, an
        exported function, a lambda stored away)."""
        brace = bisect_right(self.opens, at) - 1
        while brace >= 0 and self.closes[brace] <= at:
            brace = self.parents[brace]
        while brace >= 0:
            opening = self.opens[brace]
            kind, begin, name = _head(self.code, opening)
            if kind == "lambda":
                before = self.code[max(0, begin - 200):begin]
                named = _ASSIGNED.search(before)
                if named is not None:
                    return _Body(brace, named.group(1), begin, lambda_=True)
                # An argument (`dispatch(kind, [&] {...})`) or a lambda called where it is written.
                runs_here = before.rstrip()[-1:] in ("(", ",", ";", "{", "}", "")
                return _Body(brace, "", begin, lambda_=True) if runs_here else None
            if kind == "function":
                outer = self._nested(brace)
                if outer is None:
                    return self._helper(brace, name, begin)
                if _SCOPE_HEAD.search(self.code, max(0, self.opens[outer] - 200), self.opens[outer]):
                    return None  # a member function
                # else a block that looks like a function inside one: a macro's loop, `FOR_EACH(i) {`
            if _SCOPE_HEAD.search(self.code, max(0, opening - 200), opening):
                return None
            brace = self.parents[brace]  # a block of an if, a loop, a switch: look further out
        return None

    def _nested(self, brace: int) -> int | None:
        """The innermost brace around `brace` that is not a namespace's, None at namespace scope."""
        parent = self.parents[brace]
        while parent >= 0:
            if not _NAMESPACE_HEAD.search(self.code, max(0, self.opens[parent] - 200), self.opens[parent]):
                return parent
            parent = self.parents[parent]
        return None

    def _helper(self, brace: int, name: str, begin: int) -> _Body | None:
        """A function at namespace scope that only this file can call, else None."""
        head = self.code[max(0, begin - 400):begin]
        declaration = head[max(head.rfind(";"), head.rfind("}"), head.rfind("{")) + 1:]
        local = bool(_LOCAL_LINKAGE.search(declaration))
        parent = self.parents[brace]
        while parent >= 0 and not local:
            local = bool(re.search(r"\bnamespace\s*$", self.code[max(0, self.opens[parent] - 200):self.opens[parent]]))
            parent = self.parents[parent]
        if "::" in name:
            return None
        return _Body(brace, name, begin - len(declaration), lambda_=False, exported=not local)

    def _calls(self, body: _Body) -> list[tuple[int, int]] | None:
        """(offset, end of statement) of each direct call of `name` where it can be called from: a lambda in
        the rest of its block, a helper in the file. A call inside a macro cannot be judged: None."""
        parent = self.parents[body.brace]
        if body.lambda_:
            region = (self.closes[body.brace], self.closes[parent] if parent >= 0 else len(self.code))
        else:
            region = (0, len(self.code))
        out: list[tuple[int, int]] = []
        for match in calls_of(self.code, body.name, *region):
            call = match.start()
            if body.begin <= call <= self.closes[body.brace] or "<<<" in match.group() or not _is_call(self.code, call):
                continue
            if bisect_right(self.starts, call, 1) - 1 in self.in_macro:
                return None
            end = self.code.find(";", balanced(self.code, match.end() - 1))
            out.append((call, end if end >= 0 else len(self.code)))
        return out


_SOURCES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp", ".hh", ".inl")
_HEADERS = (".h", ".cuh", ".hpp", ".hh", ".inl")
_SKIPPED = {"__pycache__", "node_modules", "build", "dist"}
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)((?:[^\n]*\\\n)*[^\n]*)", re.MULTILINE)
# Bytes of C++ identifiers kept, every other byte a space: `data.translate(_WORD_BYTES).split()` are its words.
_WORD_BYTES = bytes(c if chr(c).isascii() and (chr(c).isalnum() or c == ord("_")) else ord(" ") for c in range(256))
_READS_LAST_ERROR = re.compile(r"\b(?:cudaGetLastError|cudaPeekAtLastError|hipGetLastError|hipPeekAtLastError)\b")


class _Project:
    """The project's other C++/CUDA files, read when a file's own text cannot settle a launch: the macros that
    read the last error, and the calls of a function defined in one file and called from others. One per lint
    run and project root (`_project`); each file is read and blanked at most once."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._files: list[tuple[str, str]] | None = None
        self._data: dict[str, bytes] = {}
        self._flows: dict[str, _Flow] = {}
        self._macros: frozenset[str] | None = None
        self._words: dict[str, frozenset[bytes]] = {}

    def files(self) -> list[tuple[str, str]]:
        if self._files is None:
            found: list[tuple[str, str]] = []
            for here, folders, names in os.walk(self.root):
                folders[:] = sorted(d for d in folders if not d.startswith(".") and d not in _SKIPPED)
                for name in sorted(names):
                    if name.endswith(_SOURCES):
                        path = os.path.join(here, name)
                        found.append((os.path.relpath(path, self.root).replace(os.sep, "/"), path))
            self._files = found
        return self._files

    def data(self, rel: str, path: str) -> bytes:
        if rel not in self._data:
            try:
                with open(path, "rb") as handle:
                    self._data[rel] = handle.read()
            except OSError:
                self._data[rel] = b""
        return self._data[rel]

    def last_error_macros(self) -> frozenset[str]:
        """Names of the macros the project defines whose expansion reads the last error."""
        if self._macros is None:
            names: set[str] = set()
            for rel, path in self.files():
                data = self.data(rel, path)
                if b"#" in data and b"LastError" in data:
                    text = data.decode("utf-8", "replace")
                    names.update(m.group(1) for m in _DEFINE.finditer(text) if _READS_LAST_ERROR.search(m.group(2)))
            self._macros = frozenset(names)
        return self._macros

    def calls(self, name: str, besides: str) -> Iterator[tuple[str, _Flow, int, int]]:
        """(file, its flow, offset, end of statement) of each call of the function `name` outside `besides`."""
        needle = name.encode()
        for rel, path in self.files():
            if rel == besides or not self._mentions(rel, path, needle):
                continue
            flow = self._flow(rel, path)
            code = flow.code
            for match in calls_of(code, name):
                call = match.start()
                if not _is_call(code, call) or _defines(code, match.end() - 1):
                    continue
                end = code.find(";", balanced(code, match.end() - 1))
                yield rel, flow, call, end if end >= 0 else len(code)

    def _mentions(self, rel: str, path: str, name: bytes) -> bool:
        """Whether the file may call `name`: it holds the name as a word. The files' words are read once, on the
        first question (a lint asks about many functions, and searching every file for each costs more)."""
        if not name.isascii():
            return name in self.data(rel, path)
        words = self._words.get(rel)
        if words is None:
            words = self._words[rel] = frozenset(self.data(rel, path).translate(_WORD_BYTES).split())
        return name in words

    def _flow(self, rel: str, path: str) -> _Flow:
        if rel not in self._flows:
            from kgate.collect.cpp_text import blank

            code = blank(self.data(rel, path).decode("utf-8", "replace")).code
            self._flows[rel] = _Flow(code, _line_starts(code), 0)
        return self._flows[rel]


def _defines(code: str, paren: int) -> bool:
    """Whether the `(` at `paren` opens a definition's or a declaration's parameters rather than a call's: what
    follows the `)` is a body or a `;` after a type-led head (`void f(int);`)."""
    after = balanced(code, paren)
    rest = code[after:after + 200].lstrip()
    return rest.startswith(("{", "const", "noexcept", "->", "override"))


_CACHE: list[tuple[SourceContext, str, _Project]] = []


def _project(source: Any, ctx: SourceContext) -> _Project:
    """The project of the file under lint (its root: the file's path less its project-relative name), shared by
    the files of one run (one SourceContext per run)."""
    path = os.path.abspath(source.path)
    rel = source.rel.replace("/", os.sep)
    root = path[:-len(rel)].rstrip(os.sep) if path.endswith(rel) else os.path.dirname(path)
    for known_ctx, known_root, project in _CACHE:
        if known_ctx is ctx and known_root == root:
            return project
    project = _Project(root or os.sep)
    _CACHE[:] = [*[entry for entry in _CACHE if entry[0] is ctx], (ctx, root, project)]
    return project


def _head(code: str, opening: int) -> tuple[str, int, str]:
    """What the `{` at `opening` opens: ("lambda", offset of its `[`, ""), ("function", offset of its name,
    name), or ("block", -1, "") for anything else (a control statement, a class, an initializer)."""
    end = opening
    while True:  # specifiers and a trailing return type
        found = _SPECIFIERS.search(code, max(0, end - 120), end)
        if found is None or found.start() == end:
            break
        end = found.start()
    close = _previous(code, end)
    if close < 0 or code[close] not in ")]":
        return "block", -1, ""
    if code[close] == ")":
        paren = _opening(code, close, "(", ")")
        if paren < 0:
            return "block", -1, ""
        close = _previous(code, paren)
        while close >= 0:  # a device lambda: `[=] __device__ (int i) {`
            word = _ATTRIBUTE_BEFORE.search(code, max(0, close - 20), close + 1)
            if word is None:
                break
            close = _previous(code, word.start())
        if close >= 0 and (code[close].isalnum() or code[close] == "_"):
            name = _NAME_BEFORE.search(code, max(0, close - 200), close + 1)
            word = name.group().strip() if name is not None else ""
            return ("function", name.start(), word) if name is not None and word not in _CONTROL else ("block", -1, "")
        if close >= 0 and code[close] == ">":  # a template lambda: `[&]<typename T>(T*) {`
            angle = _opening(code, close, "<", ">")
            close = _previous(code, angle) if angle >= 0 else -1
        if close < 0 or code[close] != "]":
            return "block", -1, ""
    bracket = _opening(code, close, "[", "]")
    if bracket < 0 or not _introduces_lambda(code[max(0, bracket - 20):bracket]):
        return "block", -1, ""
    return "lambda", bracket, ""


def _previous(code: str, end: int) -> int:
    """Offset of the last character before `end` that is not white space, -1 if none."""
    index = end - 1
    while index >= 0 and code[index].isspace():
        index -= 1
    return index


def _opening(code: str, close: int, opening: str, closing: str) -> int:
    """Offset of the bracket that opens the one at `close` (-1 if none, or too far back to be a head)."""
    depth = 0
    for index in range(close, max(-1, close - 4000), -1):
        ch = code[index]
        if ch == closing:
            depth += 1
        elif ch == opening:
            depth -= 1
            if depth == 0:
                return index
        elif ch in "{};":
            return -1
    return -1


def _introduces_lambda(before: str) -> bool:
    """Whether a `[` after this text opens a lambda, not a subscript or an array declarator."""
    text = before.rstrip()
    return not text or text[-1] in "=(,{};:?" or bool(re.search(r"\breturn$", text))


def _is_call(code: str, at: int) -> bool:
    """A name followed by `(` is a call unless a type comes before it (a declaration) or it is a member."""
    text = code[max(0, at - 200):at].rstrip()
    while text and text.rsplit("\n", 1)[-1].lstrip().startswith("#"):  # a preprocessor line ends a statement
        text = text.rsplit("\n", 1)[0].rstrip() if "\n" in text else ""
    if not text:
        return True
    if text.endswith((".", "->")):
        return False
    word = re.search(r"(\w+)$", text)
    if word is not None:
        return word.group(1) in ("return", "else", "do", "case", "throw", "co_return", "co_await")
    return text[-1] not in "*&>"


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
    if "cudaLaunchKernelEx" not in code:  # the pattern starts with `\b`: Python's engine would try every position
        return
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
