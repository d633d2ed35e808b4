"""## What it does
Flags a kernel launch with no error check after it: a `<<<...>>>` launch not
followed within a few lines (option `window`, default 3) by
`cudaGetLastError()`, `cudaPeekAtLastError()`, torch's
`C10_CUDA_KERNEL_LAUNCH_CHECK()` or `STD_CUDA_KERNEL_LAUNCH_CHECK()`, a
macro or function of the project that reads the last error (see below), a
call whose name says it reads the last error (a wrapper such as
`BNB_PEEK_LAST_ERROR()` or `getLastCudaError(...)`, defined in a header
outside the project) or one of the check macros the project configures
(option `check_macros`), and a `cudaLaunchKernelEx`, `cudaLaunchKernel`
or `cudaLaunchCooperativeKernel` call whose returned error is dropped (not wrapped in a check macro, assigned,
compared or returned; a `(void)` cast, parentheses or a macro of the project that only runs what it is given,
`#define TIMED(call) call`, drop it) and not read back by a last-error query after it (the
runtime queries, such a wrapper, or a check macro called without arguments
like `C10_CUDA_KERNEL_LAUNCH_CHECK()`). Launches in comments and string
literals are not launches, and neither launches nor checks count in code
the compiler never sees: under `#if 0` (or `#if false`), or after the
`#else` of an `#if 1`. Any other condition keeps both of its branches.

A check counts where the launch's path reaches it: not after a `return` or
`throw` that runs on every path between them, nor after a launch that is
itself returned (`return k<<<g, b>>>(x);`). A launch in one arm of an
if/else chain, in a case of a `switch` or in a loop's body is checked by a
check within `window` lines after the whole chain, switch or loop (a `break`
leads there too), however long the other arms are:

```cuda
if (blocksize == 4096)
  quantize<4096><<<blocks, 1024>>>(x);
else if (blocksize == 2048)
  quantize<2048><<<blocks, 512>>>(x);
CUDA_CHECK(cudaPeekAtLastError());
```
A launch is also checked by a read of the last error (not a check macro
wrapped around another call) later in its function on every path: in the
launch's block or one around it, not in a braceless `if`, `else` or loop
body nor in another branch, with no `return` or `throw` before it; a read
stored in a status that only a success guards counts on every path (`if (err
== cudaSuccess) err = cudaPeekAtLastError();`, braced or not: where it does
not run, the status already holds an earlier call's error). A brace
block handed to a macro (`DISPATCH_BOOL(flag, kFlag, { ...; })`), which the
preprocessor pastes where the macro is used, is such a block: a check after
a nest of dispatch macros checks the launches inside it. One read
reports every launch since the previous read, so a function that launches
several kernels, or records a CUDA graph's parameters after its launches,
and reads the error once before it returns checks them all:

```cuda
rmsnorm_kernel<<<rows, 256, 0, stream>>>(x, w, out, cols);
residual_kernel<<<rows, 256, 0, stream>>>(out, x, cols);
if (graph) graph->record_param((void*) &rmsnorm_kernel, GP_rmsnorm_x, 0);
cuda_check(cudaPeekAtLastError());
```
A launch that never runs is not judged: one after a statement that leaves
the block holding it on every path before it, in that block or one around
it up to its function's own: a `return` or `throw` (a function switched off
with a `return;` at its top), a call that ends the process (`abort()`,
`exit(1)`, `std::terminate()`, `__builtin_unreachable()`), or a check of a
condition false as written (`assert(false)`, by which the author marks a
branch never taken, and `TORCH_CHECK(false, ...)`, which throws), with no
preprocessor line (an `#ifndef` may hold the exit) in between. What the
statement returns runs first (`return run([&] { ...; k<<<g, b>>>(x); });`),
a `throw` inside an expression (`n > 0 ? n : throw e`) leaves on one path
only, and in a block with a `goto` a label may follow the exit: those
launches are judged. The cases of a switch are entered apart: a `return` in
one leaves the next reachable.

A file that no build of the project compiles is not judged: a copy kept
beside the built source (`gemv_backup.cu`), or a header no built source
includes. kgate takes a file to be unbuilt only where every build of the
project can be read for certain, all of them together (one build may compile
another's files: a `setup.py` in `python/` that lists `../csrc/op.cu`). A
build is a folder that holds a `setup.py`, a `pyproject.toml` or a
`CMakeLists.txt` with a `project(`; a file under none is built. A build is
read from its `setup.py` extensions (a list of sources bound once and never
changed) and its CMake targets (names, and whatever a `file(GLOB ...)`
matches, read from the folder CMake reads it from: a `.cmake` file's from
the folder of the file that includes it, `${PROJECT_SOURCE_DIR}` from the
folder that declares the project). A build that cannot be read so (another
build tool's file: a Makefile of any name, Bazel, Meson; a script or a
Python module that runs a compiler or builds an extension itself,
`torch.utils.cpp_extension.load`; a source that is neither a name nor a
glob) builds every file under its folder, and any file of the project where
its build files lead above its folder (`..`, `CMAKE_SOURCE_DIR`) or where
such a file lies under no build; one that names no sources (a
`pyproject.toml` alone) builds the files of its folder that no build below
it owns. A file is built where a build's sources
are it or include it (directly or through other headers, wherever they
are), where a file of the project other than C++ names it, and wherever a
built file includes a file that a macro names (`#include IMPL_HEADER`).
In any doubt the file is built and its launches are judged.

A launch, or a call of a function that launches (below), written as the
argument of a macro or function that reads the last error is checked by
it: `RUN_AND_CHECK(rmsnorm(x, out))`, where the project's `RUN_AND_CHECK`
runs what it is given and then reads the error (a function's arguments run
before its body), and a configured check macro wrapped around a launch or a
call. A macro that only runs what it is given (`{ (call); }`) checks nothing.

A launch written in a macro's body is checked by a check within `window`
lines after it inside that body (`do { k<<<g, b>>>(x);
CUDA_CHECK(cudaGetLastError()); } while (0)`): it runs after the launch
wherever the macro is used. Otherwise the launch runs where the macro is
used: each use outside a `#define` is held to the test of a call (below), whether it calls
the macro, writes an object-like macro as a statement of its own (a
`KERNEL_LAUNCH_CODE` line pasted into each branch of a host function), or
hands its name to another that expands it (a macro defined once per
platform, under `#if` and `#else`, has each definition judged the same way:
the name another `#define` gives it is no use)
(`DISPATCH_BY_DTYPE(dtype, CALL_KERNEL);`), through up to two more macros,
and in the project's other files where the file itself uses it nowhere. A
macro whose body is a `cudaLaunchKernelEx` call (`#define LAUNCH(c, x)
cudaLaunchKernelEx(&c, k, x)`) gives the launch's error as its value: a use
that keeps it (`cudaError_t e = LAUNCH(c, x);`) checks the launch. No
check is inserted into a macro's body. A launch in a macro the project never
uses cannot be judged and is not reported; with the option
`macros = "note"` such launches are counted, once per file, in a note.

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
- A named lambda or a helper passed by name to a function the file defines
  (`dispatch_launch(launch, block_size)`, `attention_backward(..., launch_softmax)`)
  runs where that function calls the parameter it is passed as: each such
  call is a call of it, held to the same test and followed outwards. Passed on
  after a checked direct call of the same lambda (to a timing loop), it
  launches what that call launched and is covered by its check.
- A lambda written where it runs (an argument, `dispatch(kind, [&] {...});`,
  or called on the spot, `[&] {...}();`) is checked by a check within
  `window` lines after the statement that holds it.
- A function that only this file can call (`static`, `inline`, or in an
  anonymous namespace, not a member) is checked when every call of it in the
  file is.
- A function other files may call (not a member, not `static`), and an
  `inline` function of a header that the header never calls, is checked
  when every call of it in the project's C++/CUDA files is. Calls in other
  files are judged where they are and not followed further, but for a call
  written in a macro's body there (a dispatcher a generator wrote, the macro
  pasted into each case of a function): each use of the macro is followed
  as a launch written in that file is, to the callers of the function that
  holds it, once. An explicit instantiation (`template void
  dispatch<float>(...);`, also written by a macro) is no call. Where several
  files define the name (a repository of several torch extensions, each
  folder with its own `cuda_forward`), a call is one of the definitions
  nearest to it: those in the deepest folder that holds both.
- A call written in a macro's body (a dispatcher the macro writes out
  wherever it is used, `#define DISPATCH(t, ...) if (t == F32)
  launch<float>(__VA_ARGS__); else launch<half>(__VA_ARGS__)`) is followed
  to each use of the macro in the file outside a `#define` (through one
  more macro at most): the use is the call. A use that ends without a `;`
  (`case 1: PICK(x) break;`) ends at its `)`.
- A call is checked by a check within `window` lines after it, after the
  control statements that hold it, or later in the calling function on
  every path (in the call's block or one around it, not in a braceless body
  nor in another branch, with no `return` or `throw` before it): one read of the last error reports
  every launch since the previous read. A call is followed outwards in turn
  (a helper called from a lambda called from a helper), up to four steps.

**The project's own checks.** A macro or host function (not a member:
`run` is a method of many classes) defined in any of the project's
C++/CUDA files whose body reads the last error, directly or through another
such macro or function, is a check wherever it is called (not where it is
defined or declared: the head of the next function is no check), without
configuration. A function's read must run on every path through it: one
that reads the last error only in a loop over what it is given (which may
be nothing), only in a branch (`if (debug)`), or only to clear it when the
status it is handed failed, checks nothing for a launch before its call. A
macro that a file also defines without the read (an empty `#else` branch
of a debug-only check, a definition after an `#undef`) is none: the build
that sees that definition checks nothing. One defined per platform, each
definition reading the error, is a check:

```cuda
#define CHECK_KERNEL_LAUNCH() CHECK(cudaGetLastError())
inline void check_cuda_launch(const char* what = "launch") { fail_on(cudaGetLastError(), what); }
inline void after_launch() { check_cuda_launch("after_launch"); }
```
A call counts when it passes a number of arguments that only a definition
reading the last error takes: of the overloads `device_check()` (which
reads it) and `device_check(cudaError_t)` (which checks the error it is
given), only the first is a launch check. A function that waits
(`cudaStreamSynchronize`) reports errors of work that already ran, not a
launch's own, and is no check in a library, whose callers decide what a
failed launch does. In a program of its own (a file that defines `main`: a
test or a benchmark) it is: a synchronizing call (`cudaDeviceSynchronize`,
`cudaStreamSynchronize`, `cudaEventSynchronize`, a `cudaMemcpy` that is not
`...Async`) whose returned error is read (wrapped in a check, assigned,
compared, returned), or a call of the project's function whose body holds
one (a `validate_result` that copies the output back under a check), later
in the launching function, in any block of it and with no `return` before
it, covers the launch, since the program reports the failure and stops
there; a helper's launch is followed to its calls (in `main`, say) and each
call held to the same test, a call in another file included where that file
is such a program (launchers kept in a file without `main`, run by the
benchmark's `main` in another file that synchronizes under a check after
them; a call from a library's file is not covered so). A function of a program called from another
program that defines a function of the same name is that one's own, not a
call of it:

```cuda
init<<<blocks, 256, 0, stream>>>(x, n);
CUDACHECK(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, stream));
if (timed) { ...; CUDACHECK(cudaStreamSynchronize(stream)); } else { ... }
```
torch's `C10_CUDA_KERNEL_LAUNCH_CHECK()` and
`STD_CUDA_KERNEL_LAUNCH_CHECK()` (the stable ABI's) are known by name,
because their definitions live in torch's headers
(`c10/cuda/CUDAException.h`, `torch/csrc/stable/macros.h`), not in the
project, and both read the last error. `check_macros` is for the other
checks kgate cannot see: macros defined outside the project.

Where some calls check and others in the same file do not, each call
without a check is reported, naming the lambda or helper and the kernel it
launches: that is where the check goes. Where no call checks, or the calls
without one are in other files, the launch is reported once, with each such
call as a related place (a helper dispatched from eight `switch` cases
missing one check is one finding, not eight). The launch itself is reported,
as before, when the lambda or helper cannot be followed: a member function,
a function nothing in the project calls (an entry point called from Python),
a lambda that is only passed on to a function defined outside the file and
never called directly, or a call written inside a macro that the file never uses outside
a `#define` (a macro that defines whole functions, say). The reading is
textual (braces matched on the code with comments and strings blanked), so
a function defined through a macro or split by `#if` branches may not be
recognised. A launch's chevrons may be spaced as nvcc allows (`k << <g, b>> >
(x)`, as a formatter that reads CUDA as C++ writes them).
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
- `check_macros` (list of strings, default `["CUDA_CHECK"]`): macros defined
  outside the project that count as an error check (of the call they wrap;
  of the last error when called without arguments), besides the runtime
  queries, torch's launch checks and the project's own checks.
- `window` (integer, default 3): lines after the launch's `;` in which the
  check must appear; a line that holds only a comment is not counted, so
  a comment block between a launch and its check does not push the check
  out of reach.
- `macros` (string, default `"ignore"`): `"note"` reports, once per file, how
  many launches written inside a `#define` no use of which was found were
  not judged.

## Fix
Unsafe (`kgate lint --fix --unsafe-fixes`): inserts a call of the first of
`check_macros`, then of torch's launch checks, that this file can use on
the line after the launch (or after the unchecked call of the helper):
`C10_CUDA_KERNEL_LAUNCH_CHECK();`, or `CUDA_CHECK(cudaGetLastError());` for
a macro that takes the call to check. A macro counts as usable when the
file defines it (`#define`), already calls it, or includes a header that
brings it (for `C10_CUDA_KERNEL_LAUNCH_CHECK`: `c10/cuda/CUDAException.h`,
which `c10/cuda/CUDAFunctions.h`, `CUDAStream.h`, `CUDAGuard.h`,
`ATen/cuda/Exceptions.h` and `ATen/cuda/CUDAContext.h` include; for
`STD_CUDA_KERNEL_LAUNCH_CHECK`: `torch/csrc/stable/macros.h`, which the
stable ABI's `library.h`, `ops.h`, `tensor.h`, `device.h` and
`accelerator.h` include); a file
with none of them gets no fix. A macro whose definition returns (a
`cudaError_t`, as FlashInfer's `FLASHINFER_CUDA_CALL` does) or that the
file only calls is inserted only into a function that already calls it, so
the result compiles where the macro did. A launch that is the whole body of
a braceless `if`, `else` or loop gets no fix either, nor one that is returned
or thrown (`return k<<<g, b>>>(x);`), after which no statement runs. Unsafe because the check changes what
happens when the launch fails: the macro throws or aborts where the error
was dropped before.
"""

from __future__ import annotations

import dataclasses
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from kgate.collect.cuda_tree import LAUNCH_MARKS
from kgate.collect.cuda_tree import SOURCES as CPP_SOURCES
from kgate.core.artifacts import Artifact
from kgate.core.findings import Related, Severity
from kgate.core.fix import Applicability, Edit, Fix
from kgate.core.rule import READS_BEYOND, Option, Report, Rule, SourceContext

if TYPE_CHECKING:
    from kgate.collect.launch_search import Search, Unchecked

# The analyses of C++ are imported by the functions that use them: the rule's module is loaded for every lint (its
# code, options and globs key the lint cache), its analyses only for a file that launches a kernel.


def read_ahead(path: str, rel: str, ctx: SourceContext) -> object:
    """The project's macros and functions that read the last error, which a launch the file's own text does not
    settle is checked against (`kgate.core.rule.Rule.read_ahead`)."""
    from kgate.collect import cuda_project

    return cuda_project.project(ctx, path, rel).last_error_checks(ctx.options["check_macros"])


def check(source: Any, ctx: SourceContext) -> Iterable[Report]:
    from kgate.collect import cuda_project
    from kgate.collect.cpp_text import blanked, without_disabled
    from kgate.collect.launch_search import search

    text = blanked(source)
    code = without_disabled(text.code)  # a launch or a check under `#if 0` is never compiled
    window = ctx.options["window"]
    found = search(code, source.rel, ctx.options["check_macros"], window,
                   lambda: cuda_project.project(ctx, source.path, source.rel), text.comment_lines)
    if found.unchecked or found.in_macros:
        source.derived[READS_BEYOND] = True  # whether a build compiles the file is read from the build's files
        if _unbuilt(source, ctx):
            return
    yield from _reports(source, text, found, ctx.options["check_macros"], window)
    if found.in_macros and ctx.options["macros"] == "note":
        yield Report(f"{len(found.in_macros)} kernel launch(es) inside #define macros not checked (no use of the macro "
                     f"was found to judge)", severity=Severity.NOTE, line=min(found.in_macros),
                     discriminator="macros")


def _unbuilt(source: Any, ctx: SourceContext) -> bool:
    """Whether no build of the project compiles the file, for certain (`kgate.collect.build_reach`): its launches
    never run."""
    from kgate.collect.build_reach import unbuilt
    from kgate.collect.files import project_root

    memo = ctx.shared.setdefault((__name__, "builds"), {})
    return unbuilt(source.path, project_root(source.path, source.rel), memo)


def _reports(source: Any, text: Any, found: Search, macros: list[str], window: int) -> Iterator[Report]:
    """A report for each unchecked launch or call, in order, with its scope and the fix that inserts a check
    (`text`: the file's `Blanked` reading)."""
    from kgate.collect.cpp_flow import line_starts
    from kgate.collect.cpp_text import Scopes
    from kgate.collect.cuda_checks import TORCH_LAUNCH_CHECKS

    code = text.code
    starts = line_starts(code)
    scopes = Scopes(code)
    candidates = [*macros, *(name for name in TORCH_LAUNCH_CHECKS if name not in macros)]
    guards = _usable_checks(source.text, code, candidates) if found.unchecked else []
    for unchecked in found.unchecked:  # in order: the scope scan continues from the last one
        guard = _guard_at(code, unchecked.offset, guards)
        fix = _insert_check(source, text, starts, unchecked.offset, unchecked.end, guard) if guard else None
        yield dataclasses.replace(_report(code, starts, unchecked, window, source.rel),
                                  scope=scopes.function_at(unchecked.offset), fix=fix)


def _report(code: str, starts: list[int], unchecked: Unchecked, window: int, rel: str) -> Report:
    from kgate.collect.cpp_flow import column, line_at

    where: dict[str, Any] = {"line": line_at(starts, unchecked.offset), "col": column(code, unchecked.offset) + 1}
    if unchecked.kind == "call":
        launched = f"launches `{unchecked.kernel}`" if unchecked.kernel else "launches a kernel"
        return Report(f"`{unchecked.callee}` {launched} and this call of it has no error check within {window} "
                      f"line(s): add cudaGetLastError() or a check macro after the call",
                      discriminator=unchecked.callee, **where)
    if unchecked.kind == "everywhere":
        sites = unchecked.sites
        related = {Related(site.path or rel, site.line or line_at(starts, site.offset),
                           f"call of `{site.callee}` with no error check after it") for site in sites}
        through = ", ".join(f"`{c}`" for c in sorted({site.callee for site in sites}))
        calls = (f"{len(sites)} of its calls through {through} do not check after the call either"
                 if unchecked.checked else f"none of its {len(sites)} call(s) through {through} checks after the "
                 f"call either")
        return Report(f"kernel launch without an error check, and {calls}: add cudaGetLastError() or a check macro "
                      f"after the launch", discriminator=unchecked.kernel,
                      related=tuple(sorted(related, key=lambda r: (r.path, r.line))), **where)
    if unchecked.kind == "launch":
        return Report(f"kernel launch without an error check within {window} line(s): add cudaGetLastError() or "
                      f"a check macro after it", discriminator=unchecked.kernel, **where)
    api = code[unchecked.offset:code.find("(", unchecked.offset)].split("<")[0].strip() or "cudaLaunchKernelEx"
    return Report(f"the error {api} returns is dropped: check it (e.g. CUDA_CHECK(...))",
                  discriminator=unchecked.kernel, **where)


# Headers that bring a check macro, for the fix: a file that includes one may call it. PyTorch's headers (2.x) define
# C10_CUDA_KERNEL_LAUNCH_CHECK in c10/cuda/CUDAException.h, which the others include on the way, and (2.10 on) the
# stable ABI's STD_CUDA_KERNEL_LAUNCH_CHECK in torch/csrc/stable/macros.h.
_DEFINED_IN = {"C10_CUDA_KERNEL_LAUNCH_CHECK": ("c10/cuda/CUDAException.h", "c10/cuda/CUDAFunctions.h",
                                                "c10/cuda/CUDAStream.h", "c10/cuda/CUDAGuard.h",
                                                "ATen/cuda/Exceptions.h", "ATen/cuda/CUDAContext.h"),
               "STD_CUDA_KERNEL_LAUNCH_CHECK": ("torch/csrc/stable/macros.h", "torch/csrc/stable/library.h",
                                                "torch/csrc/stable/ops.h", "torch/csrc/stable/tensor.h",
                                                "torch/csrc/stable/device.h", "torch/csrc/stable/accelerator.h")}


class _Guard(NamedTuple):
    name: str
    statement: str  # what the fix inserts
    # Only where the function already calls it: a macro whose definition returns (a `cudaError_t`, say) or that
    # is known only from its calls may not compile in every function.
    same_function: bool


def _usable_checks(text: str, code: str, macros: list[str]) -> list[_Guard]:
    """The configured check macros this file can call, in the configured order: those it defines, calls, or
    includes a header of."""
    from kgate.collect.cuda_checks import TORCH_LAUNCH_CHECKS

    out = []
    for name in macros:
        escaped = re.escape(name)
        # Each search below needs the macro's name or one of its headers in the text: a plain substring test
        # first spares the line-anchored searches of a large file (a generated 50 MB one) that names neither.
        named = name in text
        headers = [h for h in _DEFINED_IN.get(name, ()) if h in text]
        if not named and not headers:
            continue
        define = re.search(r"^[ \t]*#[ \t]*define[ \t]+" + escaped + r"(\([^)]*\))?((?:[^\n]*\\\r?\n)*[^\n]*)", text,
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
            out.append(_Guard(name, f"{name}();" if name in TORCH_LAUNCH_CHECKS else f"{name}(cudaGetLastError());", False))
        elif calls:
            statement = f"{name}();" if any(not c.strip() for c in calls) else f"{name}(cudaGetLastError());"
            out.append(_Guard(name, statement, True))
    return out


def _guard_at(code: str, at: int, guards: list[_Guard]) -> str | None:
    """The statement to insert after the launch at `at`: the first usable macro that may be called there."""
    from kgate.collect.cpp_statements import function_body

    body: tuple[int, int] | None = None
    for guard in guards:
        if not guard.same_function:
            return guard.statement
        body = body or function_body(code, at)
        if body[1] > body[0] and re.search(r"\b" + re.escape(guard.name) + r"\s*\(", code[body[0]:body[1]]):
            return guard.statement
    return None


def _insert_check(source: Any, text: Any, starts: list[int], at: int, semicolon: int, guard: str) -> Fix | None:
    """The fix that puts `guard` right after the statement: on a line of its own, indented as the statement, or
    after the `;` when more code follows it on that line, or when the line ends inside a comment (a block comment
    or a `//` comment continued with a backslash: a line of its own would be that comment's text, and the line
    after it could become code)."""
    from kgate.collect.cpp_flow import column, leaves, line_at
    from kgate.collect.cpp_statements import braceless_body

    code = text.code
    if semicolon < 0 or semicolon >= len(code) or code[semicolon] != ";":
        return None
    if braceless_body(code, at):
        return None  # a second statement would fall out of the if/else or the loop: left for a person
    if leaves(code, semicolon):
        return None  # `return k<<<g, b>>>(x);`: a statement after it never runs
    line = line_at(starts, semicolon)
    first = line_at(starts, at)
    raw = source.line_text(line)
    indent = re.match(r"[ \t]*", source.line_text(first))
    end = starts[line + 1] if line + 1 < len(starts) else len(code)
    if code[semicolon + 1:end].strip() or _comment_spans(text.comments, end - 1):
        edit = Edit.insert(line, column(code, semicolon) + 1, f" {guard}")
    else:
        ending = source.text[end - 2:end] if end < len(code) else source.text  # the line's own, else the file's
        newline = "\r\n" if "\r\n" in ending else "\n"
        edit = Edit.insert(line, len(raw), f"{newline}{indent.group() if indent else ''}{guard}")
    return Fix(f"insert `{guard}` after the launch: a failed launch then stops the program where it happened",
               Applicability.UNSAFE, (edit,))


def _comment_spans(comments: tuple[tuple[int, int], ...], offset: int) -> bool:
    """Whether a comment (in order, as `Blanked.comments`) holds the character at `offset` and goes on past it."""
    index = bisect_right(comments, offset, key=lambda comment: comment[0]) - 1
    return index >= 0 and comments[index][0] < offset < comments[index][1]


RULE = Rule(
    code="KG302",
    name="launch-guard",
    layer="cuda",
    severity=Severity.ERROR,
    summary="A kernel launch with no error check after it",
    check=check,
    doc=__doc__ or "",
    options={
        "check_macros": Option(["CUDA_CHECK"], "macros defined outside the project that count as an error check",
                               list, str),
        "window": Option(3, "lines after the launch in which the check must appear", int, minimum=0),
        "macros": Option("ignore", "\"note\": count the launches in macros used nowhere in a note per file", str,
                         choices=("ignore", "note")),
    },
    files=tuple(f"*{suffix}" for suffix in CPP_SOURCES),
    prefilter=(*(mark.encode() for mark in LAUNCH_MARKS), b"cudaLaunch"),
    read_ahead=read_ahead,
    reads=frozenset({Artifact.SOURCE}),
    fixes=True,
)
