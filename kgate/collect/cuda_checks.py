"""What reads the last CUDA error, and so checks the launches before it.

- The runtime's queries: `cudaGetLastError`, `cudaPeekAtLastError` (and HIP's).
- torch's launch checks, known by name because their definitions live in torch's headers, not in the
  project: `C10_CUDA_KERNEL_LAUNCH_CHECK()` (c10/cuda/CUDAException.h) and `STD_CUDA_KERNEL_LAUNCH_CHECK()`
  (torch/csrc/stable/macros.h, the stable ABI's), both `CHECK(cudaGetLastError())`.
- A call whose name says it reads the last error, for a wrapper defined where kgate cannot see it
  (`BNB_PEEK_LAST_ERROR()`, `getLastCudaError(...)`).
- The project's own macros and host functions whose body reads the last error, directly or through another
  such macro or function (`void check_cuda_launch() { CUDA_CHECK(cudaGetLastError()); }`), found in its
  C++/CUDA files (`kgate.collect.cuda_project`) without configuration. A call of a function counts when it
  passes a number of arguments that only a definition reading the last error takes: of the overloads
  `check()` (reads it) and `check(cudaError_t)` (checks the error it is given), only the first. Members are
  left out: `run` or `initialize` is a method of many classes, and a call through an object names none.
- The names a project configures (`check_macros`), for what cannot be seen: they check the call they wrap,
  and read the last error when called without arguments.

In a program of its own (a test or benchmark with a `main`), a synchronizing call whose returned error is read
(`CUDACHECK(cudaStreamSynchronize(stream))`) later in the function that launches is a check too
(`CheckedSyncs`): the program reports the failure and exits there. In a library it is not: its callers decide
what a failed launch does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from kgate.collect.cpp_flow import Flow, Matcher
from kgate.collect.cpp_statements import head, is_call
from kgate.collect.cpp_text import balanced, macros, split_arguments

RUNTIME_QUERIES = ("cudaGetLastError", "cudaPeekAtLastError", "hipGetLastError", "hipPeekAtLastError")
TORCH_LAUNCH_CHECKS = ("C10_CUDA_KERNEL_LAUNCH_CHECK", "STD_CUDA_KERNEL_LAUNCH_CHECK")
# A wrapper of the runtime's last-error query, by its name: a word holding this, called. Only a call counts, not a
# variable of that name.
LAST_ERROR_CALL = r"(?:Last(?:Cuda)?Error|LAST_(?:CUDA_)?ERROR)\w*\s*\("
# Byte strings one of which a file holds when it may read the last error: what the first search reads.
NEEDLES = (b"LastError", b"LastCudaError", b"LAST_ERROR", b"LAST_CUDA_ERROR", *(n.encode() for n in TORCH_LAUNCH_CHECKS))
# The runtime's calls that wait for the work before them and return the error of a launch that failed (a copy that
# is not `...Async` waits for the work before it on the default stream).
SYNCHRONIZING = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
                 "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy")
SYNC_NEEDLES = (b"Synchronize", b"Memcpy")
_SYNC = re.compile(r"(?:cuda|hip)(?:(?:Device|Stream|Event)Synchronize|Memcpy)\s*\(")
_MAIN = re.compile(r"main\s*\(")
_DEFINE_HEAD = re.compile(r"^.*#\s*define\s+\w+(?:\([^)]*\))?\s*", re.DOTALL)
_CONTINUED = re.compile(r"\\\r?\n")
_VOID = re.compile(r"\(\s*void\s*\)|static_cast\s*<\s*void\s*>")
_WRAPPER = re.compile(r"(?:\(\s*void\s*\)\s*)?([A-Za-z_]\w*)\s*\(+")
# What stands around a parameter run as a statement in a macro's body: `do`/`while (0)`, braces, parentheses, `;`,
# `(void)` casts and line continuations.
_STATEMENT_PARTS = re.compile(r"\bdo\b|\bwhile\s*\(\s*0\s*\)|\(\s*void\s*\)|static_cast\s*<\s*void\s*>|[(){};\s\\]")
_CLASS_HEAD = re.compile(r"\b(?:class|struct|union)\b[^;{}()]*$")
_MOST_ARGUMENTS = 32  # what a variadic parameter list is taken to accept

# The numbers of arguments a call may pass to read the last error.
Counts = frozenset[int]


@dataclass(frozen=True)
class Checks:
    """A search for checks in blanked code, used as `re.Pattern.search` and `finditer` are: a regular expression,
    and for the project's functions the numbers of arguments a call must pass to read the last error."""

    pattern: re.Pattern[str]
    counts: Mapping[str, Counts]
    # The words one of which every match of `pattern` begins with (None: not known): the search tries the pattern
    # where they stand rather than at every position of the text.
    starts: tuple[str, ...] | None = None
    # Names that say they read the last error but that the project defines itself: what they do is their
    # definitions' (a project check among `counts` if they read it), not their name's.
    defined: frozenset[str] = frozenset()

    def finditer(self, code: str, pos: int = 0, endpos: int | None = None) -> Iterator[re.Match[str]]:
        # The alternatives that start a word are matched without a leading `\b` (a pattern that starts with one
        # has no first characters to look for, and the engine tries it at every position) and checked here.
        for match in self._matches(code, pos, len(code) if endpos is None else endpos):
            if match.lastgroup != "named" and _continues_word(code, match.start()):
                continue
            if match.lastgroup == "named" and self.defined and _named_word(code, match) in self.defined:
                continue
            call = match.group("call") if match.lastgroup == "call" else None
            if call is None or is_call(code, match.start()) and _passes(code, match.end() - 1) in self.counts[call]:
                yield match

    def search(self, code: str, pos: int = 0, endpos: int | None = None) -> re.Match[str] | None:
        return next(self.finditer(code, pos, endpos), None)

    def _matches(self, code: str, pos: int, endpos: int) -> Iterator[re.Match[str]]:
        """`pattern.finditer(code, pos, endpos)`: every match begins with one of `starts`, so the pattern is tried
        only where one stands, in order, each try after the end of the last match (as `finditer` goes on)."""
        if self.starts is None:
            yield from self.pattern.finditer(code, pos, endpos)
            return
        after = pos
        for at in sorted({at for word in self.starts for at in _occurrences(code, word, pos, endpos)}):
            if at >= after and (match := self.pattern.match(code, at, endpos)) is not None:
                yield match
                after = match.end()


def _occurrences(code: str, word: str, pos: int, endpos: int) -> Iterator[int]:
    at = code.find(word, pos, endpos)
    while at >= 0:
        yield at
        at = code.find(word, at + 1, endpos)


def launch_checks(configured: Sequence[str], project: Mapping[str, Counts | None],
                  defined: frozenset[str] | None = frozenset()) -> Checks:
    """What checks a `<<<...>>>` launch after it: any read of the last error, and a configured macro whatever it
    wraps. `defined`: the names that say they read the last error which the project defines itself (None: not
    read yet, and no such name counts)."""
    return checks_of((*RUNTIME_QUERIES, *TORCH_LAUNCH_CHECKS, *configured), project, named=defined is not None,
                     defined=defined or frozenset())


def last_error_reads(configured: Sequence[str], project: Mapping[str, Counts | None],
                     defined: frozenset[str] | None = frozenset()) -> Checks:
    """What reads the last error: what reads back a `cudaLaunchKernelEx` error that was dropped, and what makes
    a macro or function of the project a check. A configured macro reads it only when called without arguments
    (`MY_LAUNCH_CHECK()`); wrapped around another call it checks that call. `defined` as for `launch_checks`."""
    return checks_of((*RUNTIME_QUERIES, *TORCH_LAUNCH_CHECKS), project, bare_calls=configured,
                     named=defined is not None, defined=defined or frozenset())


def checks_of(words: Iterable[str], project: Mapping[str, Counts | None], *, bare_calls: Iterable[str] = (),
              named: bool = False, defined: frozenset[str] = frozenset()) -> Checks:
    """A search for `words` wherever they stand, `bare_calls` called without arguments, the project's macros and
    functions (`project`: name -> the numbers of arguments a call must pass, None for any use) and, when `named`,
    a call whose name says it reads the last error, unless the project defines that name (`defined`)."""
    bare_calls = tuple(bare_calls)
    any_use = sorted({*words, *(name for name, counts in project.items() if counts is None)})
    calls = sorted(name for name, counts in project.items() if counts is not None)
    alternatives = [r"(?P<word>(?:" + "|".join(map(re.escape, any_use)) + r")\b)"] if any_use else []
    alternatives += [r"(?P<named>" + LAST_ERROR_CALL + ")"] if named else []
    alternatives += [r"(?P<bare>" + "|".join(re.escape(name) + r"\s*\(\s*\)" for name in bare_calls) + ")"] \
        if bare_calls else []
    if calls:  # (an alternative that matches nothing would still be tried at every position)
        alternatives.append(r"(?P<call>" + "|".join(map(re.escape, calls)) + r")\s*(?:<[^;{}()]*?>)?\s*\(")
    # Where a match can begin: each alternative begins with one of its words (`LAST_ERROR_CALL` with `Last` or `LAST_`).
    starts = (*any_use, *(("Last", "LAST_") if named else ()), *bare_calls, *calls)
    return Checks(_pattern("|".join(alternatives) or r"(?!)"),
                  {name: counts for name, counts in project.items() if counts is not None},
                  starts if all(starts) else None,  # (an empty word would begin a match anywhere)
                  frozenset(defined) - set(project))


def _named_word(code: str, match: re.Match[str]) -> str:
    """The whole name of a call `LAST_ERROR_CALL` matched (`getLastCudaError` of `getLastCudaError(`)."""
    start = match.start()
    while start > 0 and (code[start - 1].isalnum() or code[start - 1] == "_"):
        start -= 1
    return code[start:match.end()].rstrip("( \t\n")

# The names a file may define that say they read the last error (`LAST_ERROR_CALL` without its parenthesis).
NAMED_WORD = re.compile(r"\b\w*(?:Last(?:Cuda)?Error|LAST_(?:CUDA_)?ERROR)\w*")


@lru_cache(maxsize=64)
def _pattern(source: str) -> re.Pattern[str]:
    """The compiled search (a lint builds the same few for every file it reads)."""
    return re.compile(source)


def readers(code: str, flow: Flow, reads: Matcher) -> Iterator[tuple[str, Counts | None]]:
    """(name, counts) of each macro and host function of blanked `code` whose body holds a match of `reads`, for a
    function one that runs on every path through it (not in a loop's body, which may run no time, nor in a branch:
    `apply_loras` reads the last error only for each adapter it is given): the numbers of arguments a call of it may
    pass (None for an object-like macro, which any use expands)."""
    defined = macros(code)
    for match in reads.finditer(code):
        at = match.start()
        macro = next((m for m in defined if m.start <= at < m.end), None)
        if macro is None:
            brace = _function_brace(code, flow, at)
            found = _function(code, flow, brace) if brace >= 0 else None
            if found is not None and flow.every_path(at, brace):
                yield found
        elif at >= macro.body:  # in the body, not the name being defined
            yield macro.name, None if macro.params is None else _macro_counts(macro.params)


def definitions(code: str, flow: Flow, names: Iterable[str]) -> Iterator[tuple[str, int, int, Counts]]:
    """(name, start, end, counts) of the body of each host function of `names` that blanked `code` defines and that
    is not a member, and the numbers of arguments a call of it may pass."""
    pattern = re.compile("(?:" + "|".join(map(re.escape, sorted(names))) + r")\s*\(")
    for match in pattern.finditer(code):
        if _continues_word(code, match.start()):
            continue
        opening = code.find("{", balanced(code, match.end() - 1))
        brace = flow.at_open.get(opening, -1)
        found = _function(code, flow, brace) if brace >= 0 else None
        if found is not None and code.startswith(found[0], match.start()):
            yield found[0], opening, flow.closes[brace], found[1]


def _function_brace(code: str, flow: Flow, at: int) -> int:
    """The body of the innermost function that holds `at`, lambdas in between passed over; -1 for none."""
    brace = flow.around(at)
    while brace >= 0 and head(code, flow.opens[brace])[0] != "function":
        brace = flow.parents[brace]
    return brace


def _function(code: str, flow: Flow, brace: int) -> tuple[str, Counts] | None:
    """(name, counts) of the function whose body is the block `brace`, when it is a host function and not a
    member (device code does not read the host's last error); None otherwise."""
    kind, begin, name = head(code, flow.opens[brace])
    if kind != "function" or "::" in name or _in_class(code, flow, brace) or _device_only(code, begin):
        return None
    paren = code.find("(", begin)
    return name, _function_counts(code[paren + 1:balanced(code, paren) - 1])


def _in_class(code: str, flow: Flow, brace: int) -> bool:
    """Whether the body `brace` is a member function's: the block around it is a class's, struct's or union's."""
    parent = flow.parents[brace]
    return parent >= 0 and _CLASS_HEAD.search(code, max(0, flow.opens[parent] - 300), flow.opens[parent]) is not None


def _device_only(code: str, name: int) -> bool:
    """Whether the function whose name starts at `name` is `__device__` or `__global__` and not `__host__`."""
    start = max(code.rfind(";", 0, name), code.rfind("}", 0, name), code.rfind("{", 0, name)) + 1
    declaration = code[start:name]
    return "__host__" not in declaration and ("__device__" in declaration or "__global__" in declaration)


def _macro_counts(params: str) -> Counts:
    names = [p.strip() for p in params.strip("()").split(",") if p.strip()]
    if names and names[-1].endswith("..."):
        return frozenset(range(len(names) - 1, _MOST_ARGUMENTS + 1))
    return frozenset({len(names)})


def _function_counts(params: str) -> Counts:
    """The numbers of arguments a parameter list accepts: defaults may be left out, `...` takes any number."""
    found = split_arguments(params) if params.strip() not in ("", "void") else []
    if found and found[-1].endswith("..."):
        return frozenset(range(sum(1 for p in found[:-1] if "=" not in p), _MOST_ARGUMENTS + 1))
    return frozenset(range(sum(1 for p in found if "=" not in p), len(found) + 1))


def _continues_word(code: str, at: int) -> bool:
    return at > 0 and (code[at - 1].isalnum() or code[at - 1] == "_")


def _passes(code: str, paren: int) -> int:
    """The number of arguments the call whose `(` is at `paren` passes."""
    inner = code[paren + 1:balanced(code, paren) - 1]
    return len(split_arguments(inner)) if inner.strip() else 0


class CheckedSyncs:
    """A synchronizing call whose returned error is read (wrapped in a check, assigned, compared or returned), or a
    call of a function of the project whose body holds one (`functions`, as `Checks` takes them: a test program's
    `validate_result` that copies the output back under a check), searched for as `Checks` is."""

    def __init__(self, functions: Mapping[str, Counts | None] | None = None) -> None:
        self.calls = checks_of((), functions) if functions else None

    def finditer(self, code: str, pos: int = 0, endpos: int | None = None) -> Iterator[re.Match[str]]:
        end = len(code) if endpos is None else endpos
        found = [match for match in _SYNC.finditer(code, pos, end)
                 if not _continues_word(code, match.start()) and error_kept(code, match.start())]
        if self.calls is not None:
            found = sorted((*found, *self.calls.finditer(code, pos, end)), key=lambda match: match.start())
        yield from found

    def search(self, code: str, pos: int = 0, endpos: int | None = None) -> re.Match[str] | None:
        return next(self.finditer(code, pos, endpos), None)


def is_program(code: str, flow: Flow) -> bool:
    """Whether blanked `code` defines `main` outside every block: a program of its own (a test, a benchmark), not a
    library's source."""
    for match in _MAIN.finditer(code):
        if _continues_word(code, match.start()) or flow.around(match.start()) >= 0:
            continue
        close = balanced(code, match.end() - 1)
        if code[close:close + 200].lstrip().startswith("{"):
            return True
    return False


def error_kept(code: str, start: int, passes: Callable[[str], bool] | None = None) -> bool:
    """Whether the error returned by the call at `start` is read rather than dropped: the statement's text before
    the call decides. Nothing (or a `(void)` cast, or parentheses) drops it, and so does a macro the call is the
    whole argument of where `passes` says the macro only runs what it is given (`#define TIMED(x) x`); a check
    macro, an assignment, a comparison, a condition or a `return` keeps it. In a macro's body the backslashes that
    continue its lines are no text of the statement, and neither is the `#define` of a macro whose body begins with
    the call."""
    head = max(code.rfind(";", 0, start), code.rfind("{", 0, start), code.rfind("}", 0, start)) + 1
    before = _DEFINE_HEAD.sub("", " ".join(_CONTINUED.sub(" ", code[head:start]).split()))
    bare = _VOID.sub("", before).rstrip("( ")
    if bare == "":
        return False
    wrapper = _WRAPPER.fullmatch(bare + "(") if before.endswith("(") else None
    return not (wrapper is not None and passes is not None and passes(wrapper.group(1)))


def passes_through(params: str | None, body: str) -> bool:
    """Whether a function-like macro's body only runs what its one parameter is given, as a statement
    (`#define TIMED(x) x`, `do { (void)(x); } while (0)`, `#define RUN(...) __VA_ARGS__`): a value it returns is
    dropped."""
    if params is None:
        return False
    names = [p.strip() for p in params.strip("()").split(",") if p.strip()]
    if len(names) != 1:
        return False
    name = "__VA_ARGS__" if names[0].endswith("...") else names[0]
    return _STATEMENT_PARTS.sub("", body) == name
