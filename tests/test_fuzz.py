"""Fuzzing: every parser of compiler output, configuration, baseline and comments, fed mutated and arbitrary text.

Each parser may return anything or raise kgate's own error (KgateError and its subclasses): any
other exception would reach the user as a traceback, or as "internal error" on a kernel. The
inputs start from real compiler output checked in under tests/data/ (and the repository's own
configuration and baseline) and are mutated line by line and character by character: lines
deleted, duplicated, swapped, cut short; tokens the parser looks for spliced in; numbers replaced
by huge, negative or non-ASCII ones; arbitrary text, control characters and invalid bytes inserted.

Example counts are set per parser (EXAMPLES): 20,000 examples, under a minute of one core (structured
inputs are made from one seed each, see "seeded inputs" below). The examples are the same on every run
(derandomized: CI fails for a change, not for a draw); KGATE_FUZZ_RANDOM=1 draws new ones.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from conftest import DATA, FIXTURES, REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgate.collect import cpp_text
from kgate.collect.cuda_names import (
    base_name,
    definition_line,
    demangle,
    display_names,
    global_definitions,
    matches,
    name_forms,
    short_name,
)
from kgate.compile import records
from kgate.core.config import load_config, parse_config
from kgate.core.errors import KgateError
from kgate.core.suppress import parse_directives
from kgate.evaluate.source import from_json
from kgate.facts.model import KernelFacts
from kgate.facts.ptx import entry_headers, parse_ptx
from kgate.facts.ptxas_log import parse_ptxas_log
from kgate.facts.run import check_record as check_facts_record
from kgate.facts.sass import parse_sass
from kgate.facts.ttgir import parse_pipeline
from kgate.pipeline import lint_cache
from kgate.ratchet.baseline import parse as parse_baseline
from kgate.support.comments import cpp as cpp_comments

T = TypeVar("T")

EXAMPLES = {
    "ptx": 1000, "sass": 1000, "ptxas_log": 2000, "ttgir": 1000, "demangle": 3000, "cuda_source": 1000,
    "suppress": 2000, "config_table": 1500, "config_file": 1000, "baseline": 2000, "records": 1500, "blank": 3000,
}
# The same examples on every run, so that CI fails only for a change; KGATE_FUZZ_RANDOM=1 explores new ones.
RANDOM = os.environ.get("KGATE_FUZZ_RANDOM") == "1"


def fuzz(name: str) -> Any:
    return settings(max_examples=EXAMPLES[name], deadline=None, derandomize=not RANDOM, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def seeds(*names: str) -> list[str]:
    return [(DATA / name).read_text(encoding="utf-8") for name in names]


PTX = seeds("mxfp8_tile.sm_120a.ptx", "pdl_load_before_wait.sm_120a.ptx", "pdl_wait_first.sm_120a.ptx",
            "pdl_wait_under_branch.sm_120a.ptx", "plain.compute_120.ptx")
SASS = seeds("mxfp8_tile.sm_120a.sass", "pdl_wait_first.sm_120a.sass")
PTXAS_LOGS = seeds("mxfp8_tile.sm_120a.ptxas.log", "nvcc_spill.sm_120a.ptxas.log")
TTGIR = seeds("tile_matmul.sm_120a.ttgir")
# .entry names nvcc gave kernels of fixtures/cuda (templates, a namespace, an anonymous namespace).
SYMBOLS = [
    "_Z10wait_firstPKfPfi", "_Z15mxf8_mma_kernelPKjS0_S0_Pf", "_ZN3ops14rmsnorm_kernelI6__halfLi128EEEvPKT_PS2_i",
    "_ZN3ops14rmsnorm_kernelIfLi256EEEvPKT_PS1_i", "_ZN38_GLOBAL__N__695520f4_6_pdl_cu_de0d86c610anon_waitsEPKfPfi",
    "_Z19bf16_instead_kernelPKjS0_Pf", "plain_c_kernel", "mxfp8_tile",
]
CUDA_SOURCES = [path.read_text(encoding="utf-8", errors="replace")
                for path in sorted((FIXTURES / "cuda").glob("*.cu*")) + sorted((FIXTURES / "rules").glob("KG30*/*.cu"))]
PYTHON_SOURCES = [(FIXTURES / "rules" / name).read_text(encoding="utf-8")
                  for name in ("KG202/autotune_side_effect.py", "KG201/runtime_autotune.py", "KG004/broken_syntax.py")]
CONFIGS = [(FIXTURES / name / "kgate.toml").read_text(encoding="utf-8") for name in ("compiled", "cuda", "cuda_cmake")]
CONFIGS.append((REPO / "pyproject.toml").read_text(encoding="utf-8"))
BASELINES = [(REPO / "kgate-baseline.toml").read_text(encoding="utf-8"), (
    '# kgate baseline\nversion = 1\n\n[toolchain]\n"ptxas-blackwell" = "13.4.59"\ntriton = "3.9.0"\n\n[kernels]\n'
    '"k:gemm|BK=64,BM=128,BN=128,warps=8,stages=3|sm_120a" = { registers = 245, spill_bytes = 0, stack_bytes = 0, '
    'smem_bytes = 32768 }\n\n[findings]\n"KG102|k.py|k:gemm|BK=64,BM=128,BN=128,warps=8,stages=3|sm_120a" = 1\n'
    '"KG303|csrc/a.cu|csrc/a.cu" = { count = 1, value = 820 }\n')]

# What a parser looks for, and what breaks naive number and text handling.
TOKENS = [
    "{", "}", "(", ")", ";", ":", ",", "\n", "\r\n", "\t", "\x00", "\ufeff", "\ufffd", "\u0663", "//", "/*", "*/",
    '"', "'", "\\", ".entry", ".func", ".visible .entry k(", ".target sm_120a", ".version 8.8", ".loc 1 2 3",
    '.file 1 "x.cu"', ".maxntid 128, 1, 1", "griddepcontrol.wait;", "ld.global.u32 %r1, [%rd1];", "bra $L__BB0_1;",
    "$L__BB0_1:", "@%p1 bra $L__BB0_2;", "@!P0 ", "ret;", "call (%r1), f, (%r2);", "mma.sync.aligned.kind::mxf8f6f4",
    "Function : ", "/*0120*/ ", "ACQBULK ;", "HMMA.16816.F32.BF16", "ptxas info    : ", "Compiling entry function 'k' for 'sm_120a'",
    "Function properties for k", "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads", "Used 255 registers",
    "used 1 barriers", "bytes smem", "bytes cumulative stack size", "ttg.local_alloc : () -> !ttg.memdesc<",
    "x64xbf16, #shared, #smem, mutable>", "__global__", "__launch_bounds__(", "template <typename T>", "<<<", ">>>",
    "kgate: ignore[KG201] reason", "# kgate: ignore-file[spill]", "// kgate: ignore[", "kgate: ignore", "[", "]",
    "_Z", "_ZN", "I", "E", "Li", "St", "S_", "T_", "(anonymous namespace)::",
]
NUMBERS = ["0", "-1", "1" * 40, "9" * 5000, "\u0663\u0664", "1e309", "0x1f", "", "3.5", "-0", "4294967296"]

# --------------------------------------------------------------------------- seeded inputs
#
# Hypothesis spends about a tenth of a millisecond of bookkeeping on every value it draws, and a mutated
# PTX file or a configuration table took dozens of draws: that bookkeeping was five sixths of these tests'
# time, the parsers one sixth. The structured inputs are therefore made by a random.Random that Hypothesis
# seeds, one draw per input. Hypothesis still chooses the examples, makes them the same on every run and
# prints a failing one whole; what a seeded input gives up is being shrunk, which a search for crashes can
# do without. Plain text (st.text, st.binary) is one draw, and stays Hypothesis's own.

# Characters that break naive text handling, beside printable ASCII and arbitrary code points.
ODD_CHARACTERS = ("\x00\t\n\r\x0b\x0c\x1b\x7f\x85\xa0\u2028\u2029\ufeff\ufffd\u0663\u0301\U0001f600"
                  "\\\"'#[]{}=.,:;*/<>$%@")


def seeded(make: Callable[[random.Random], T]) -> st.SearchStrategy[T]:
    """Inputs made by `make` from a random.Random seeded by one Hypothesis draw."""
    return st.integers(0, 2 ** 64 - 1).map(lambda seed: make(random.Random(seed)))


def random_text(rng: random.Random, max_size: int) -> str:
    """Like st.text: any code point but a surrogate, weighted toward ASCII and the characters above."""
    out = []
    for _ in range(rng.randint(0, max_size)):
        roll = rng.random()
        if roll < 0.55:
            out.append(chr(rng.randint(32, 126)))
        elif roll < 0.8:
            out.append(rng.choice(ODD_CHARACTERS))
        elif roll < 0.95:
            point = rng.randint(0x80, 0xFFFF)
            out.append("\ufffd" if 0xD800 <= point <= 0xDFFF else chr(point))
        else:
            out.append(chr(rng.randint(0x10000, 0x10FFFF)))
    return "".join(out)


def odd(rng: random.Random) -> str:
    """A token a parser looks for, a number that breaks naive handling, arbitrary text or invalid bytes."""
    kind = rng.randrange(4)
    if kind == 0:
        return rng.choice(TOKENS)
    if kind == 1:
        return rng.choice(NUMBERS)
    if kind == 2:
        return random_text(rng, 30)
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 12))).decode("latin-1")


def mutate(rng: random.Random, originals: list[str], max_ops: int = 8) -> str:
    """One of `originals` with up to `max_ops` line- and character-level mutations."""
    lines = rng.choice(originals).splitlines(keepends=True) or [""]
    for _ in range(rng.randint(0, max_ops)):
        if not lines:
            lines = [""]
        kind = rng.choice(("delete", "duplicate", "swap", "insert", "splice", "number", "cut", "block"))
        i = rng.randrange(len(lines))
        if kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "swap":
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "insert":
            lines.insert(i, odd(rng) + rng.choice(("\n", "", "\r\n")))
        elif kind == "splice":
            at = rng.randint(0, len(lines[i]))
            lines[i] = lines[i][:at] + odd(rng) + lines[i][at + rng.randint(0, 3):]
        elif kind == "number":  # any number of the line, not only its first (a count after a key's digits)
            numbers = list(re.finditer(r"\d+", lines[i]))
            if numbers:
                found = rng.choice(numbers)
                lines[i] = lines[i][:found.start()] + rng.choice(NUMBERS) + lines[i][found.end():]
        elif kind == "cut":
            lines = [*lines[:i], lines[i][: rng.randint(0, len(lines[i]))]]
        else:  # a block of lines moved elsewhere, as a bad merge would
            j = rng.randint(i, min(len(lines), i + 20))
            block, lines = lines[i:j], lines[:i] + lines[j:]
            at = rng.randint(0, len(lines))
            lines = lines[:at] + block + lines[at:]
    return "".join(lines)


def mutated(originals: list[str], max_ops: int = 8) -> st.SearchStrategy[str]:
    return seeded(lambda rng: mutate(rng, originals, max_ops))


def joined(parts: list[str], max_size: int, prefix: str = "") -> st.SearchStrategy[str]:
    """Up to `max_size` of `parts`, in any order and repeated, joined."""
    return seeded(lambda rng: prefix + "".join(rng.choice(parts) for _ in range(rng.randint(0, max_size))))


def any_text(originals: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(mutated(originals), st.text(max_size=300), joined(TOKENS, 40))


# --------------------------------------------------------------------------- compiler output


@fuzz("ptx")
@given(any_text(PTX))
def test_ptx_parser_raises_only_parse_errors(text: str) -> None:
    try:
        entry_headers(text)
    except KgateError:
        pass
    try:
        facts = parse_ptx(text)
    except KgateError:
        return
    for entry in facts.entries:
        assert facts.entry(entry.name).name == entry.name
        assert entry.global_accesses >= len(entry.unwaited_accesses)
    try:
        facts.entry()
    except KgateError:
        pass


@fuzz("sass")
@given(any_text(SASS))
def test_sass_parser_never_raises(text: str) -> None:
    for function in parse_sass(text).values():
        assert all(count > 0 for count in function.opcodes.values())
        function.mma, function.global_loads, function.spill_instructions  # noqa: B018


@fuzz("ptxas_log")
@given(any_text(PTXAS_LOGS))
def test_ptxas_log_parser_raises_only_parse_errors(text: str) -> None:
    try:
        resources = parse_ptxas_log(text)
    except KgateError:
        return
    for entry in resources.values():
        assert min(entry.registers, entry.spill_stores, entry.spill_loads, entry.stack_frame, entry.smem_static) >= 0


@fuzz("ttgir")
@given(any_text(TTGIR))
def test_ttgir_parser_never_raises(text: str) -> None:
    pipeline = parse_pipeline(text)
    assert pipeline is None or pipeline.buffers >= 1 and pipeline.bytes_per_buffer >= 0


def test_the_seeds_parse_as_real_output() -> None:
    """The fuzzing starts from output the parsers understand, or mutations would test little."""
    assert all(parse_ptx(text).entries for text in PTX)
    assert all(parse_sass(text) for text in SASS)
    assert all(parse_ptxas_log(text) for text in PTXAS_LOGS)
    assert parse_pipeline(TTGIR[0]) is not None
    assert short_name(SYMBOLS[2]) == "ops::rmsnorm_kernel<__half, 128>"
    assert all(parse_directives(text, python=True) is not None for text in PYTHON_SOURCES)


# --------------------------------------------------------------------------- CUDA names and sources


@fuzz("demangle")
@given(st.one_of(mutated(SYMBOLS, 4), st.text(max_size=80).map(lambda s: "_Z" + s), st.text(max_size=40),
                 joined([*TOKENS[-12:], "1a", "3ops", "v", "i", "P", "K", "f"], 60, prefix="_Z")),
       seeded(lambda rng: [rng.choice(["*", "rmsnorm*", "ops::*<__half*", "[", "[z-a]", "**", "?"])
                           if rng.random() < 0.5 else random_text(rng, 10) for _ in range(rng.randint(0, 3))]))
def test_demangler_and_name_matching_never_raise(symbol: str, patterns: list[str]) -> None:
    text = demangle(symbol)
    assert isinstance(text, str)
    shown = short_name(symbol)
    names = display_names([symbol, symbol + "x", SYMBOLS[0]])
    assert len(names) == len({symbol, symbol + "x", SYMBOLS[0]})
    base_name(shown)
    assert shown in name_forms(shown)
    matches(shown, patterns)


@fuzz("cuda_source")
@given(any_text(CUDA_SOURCES), st.integers(-5, 10_000))
def test_kernel_definitions_in_cuda_source_never_raise(text: str, hint: int) -> None:
    found = global_definitions(text)
    for name, lines in found.items():
        assert lines == sorted(lines) and definition_line(found, name, hint) in lines


@fuzz("blank")
@given(st.one_of(joined([*"/*\"'\\\nuULR8()xab1_ {};#<>", "//", "/*", "*/", 'R"(', ')"', 'u8R"x(', ')x"', "'0'",
                         "1'000", "\r\n", "#include <", "__has_include(<", "\\\n", "0x1'F", "1e+5"], 60),
                 mutated(CUDA_SOURCES, 4)))
def test_blanked_cpp_equals_the_character_by_character_reference(text: str) -> None:
    """blank() jumps between places where a comment or literal may start; it must agree with a scanner that
    looks at every character (the implementation it replaced), and keep every offset and line."""
    fast = cpp_comments.blank(text)
    assert (fast.code, fast.comment_lines) == reference_blank(text)
    assert len(fast.code) == len(text) and fast.code.count("\n") == text.count("\n")
    # The launch readings' blanking joins a launch's spaced chevrons on top: every offset and line still holds,
    # and nothing but spaced chevrons changes.
    joined = cpp_text.blank(text)
    assert len(joined.code) == len(text) and joined.comment_lines == fast.comment_lines
    assert [i for i, (a, b) in enumerate(zip(joined.code, fast.code)) if a != b and not (a in "<> " and b in "<> ")] == []


def reference_blank(text: str) -> tuple[str, frozenset[int]]:
    out = list(text)
    comment_lines: set[int] = set()
    index, line, length = 0, 1, len(text)
    floor = 0  # where the last token read ended: a number's digits are not looked for before it

    def wipe(start: int, end: int, comment: bool) -> None:
        current = line
        for position in range(start, end):
            if text[position] == "\n":
                current += 1
            else:
                out[position] = " "
            if comment:
                comment_lines.add(current)

    def spliced(at: int) -> int:
        """Past the backslash-newlines from `at`."""
        while text.startswith("\\\n", at) or text.startswith("\\\r\n", at):
            at += 2 if text[at + 1] == "\n" else 3
        return at

    def header_name(at: int) -> int:
        opener = re.compile(r"#[ \t]*(?:include(?:_next)?|import)[ \t]*<|__has_include(?:_next)?[ \t]*\([ \t]*<")
        found = opener.match(text, at)
        if found is None:
            return -1
        before = re.sub(r"/\*.*?\*/", "", text[text.rfind("\n", 0, at) + 1:at])
        close, newline = text.find(">", found.end()), text.find("\n", found.end())
        if close < 0 or 0 <= newline < close or text[at] == "#" and before.strip():
            return -1
        return close + 1

    while index < length:
        ch = text[index]
        end = -1
        if ch == "\n":
            line += 1
            index += 1
            continue
        after = spliced(index + 1) if ch == "/" else -1
        if ch in "#_" and header_name(index) >= 0:
            index = floor = header_name(index)
            continue
        if after >= 0 and text[after:after + 1] == "/":
            end = cpp_comments.line_comment_end(text, index)
            wipe(index, end, True)
        elif after >= 0 and text[after:after + 1] == "*":
            close = after + 1
            while close < length and not (text[close] == "*" and text[spliced(close + 1):spliced(close + 1) + 1] == "/"):
                close += 1
            end = length if close >= length else spliced(close + 1) + 1
            wipe(index, end, True)
        else:
            raw = cpp_comments.RAW_OPEN.match(text, index) if ch in "uULR" else None
            if raw and (index == 0 or not (text[index - 1].isalnum() or text[index - 1] == "_")):
                close = text.find(")" + raw.group(1) + '"', raw.end())
                end = length if close < 0 else close + len(raw.group(1)) + 2
                wipe(raw.end(), max(raw.end(), end - len(raw.group(1)) - 2), False)
            elif ch == "'" and index > 0 and cpp_comments.digit_separator(text, index, floor):
                end = index  # the rest of the number: `'` before a letter or digit, an exponent and its sign, ...
                word = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
                while end < length:
                    if text[end] == "'" and text[end + 1:end + 2] and text[end + 1] in word or (
                            text[end] in "eEpP" and text[end + 1:end + 2] in ("+", "-") and text[end + 1:end + 2]):
                        end += 2
                    elif text[end] in word + ".":
                        end += 1
                    else:
                        break
            elif ch in "\"'":
                end = cpp_comments.literal_end(text, index, ch)
                wipe(index + 1, max(index + 1, end - 1), False)
        if end < 0:
            index += 1
            continue
        line += text.count("\n", index, end)
        index = floor = end
    return "".join(out), frozenset(comment_lines)


# --------------------------------------------------------------------------- suppression comments


SUPPRESSION_SEEDS = PYTHON_SOURCES + CUDA_SOURCES[:3] + [
    "x = 1  # kgate: ignore[KG201] the shape is fixed\n", "# kgate: ignore-file[spill, KG102]: measured\n",
    "k<<<1, 1>>>(x);  // kgate: ignore[launch-guard] checked by the caller\n", "s = '# kgate: ignore[KG201] x'\n",
    "x = 1  # kgate: ignore[]\n", "x = 1  # kgate: ignore\n", 'x = """\n# kgate: ignore[KG201] in a string\n"""\n',
]


@fuzz("suppress")
@given(any_text(SUPPRESSION_SEEDS), st.booleans())
def test_suppression_comments_parse_without_raising(text: str, python: bool) -> None:
    for directive in parse_directives(text, python=python):
        assert directive.line >= 1 and directive.col >= 1
        assert directive.problem or directive.codes and directive.reason


# --------------------------------------------------------------------------- configuration and baseline


SCALAR_WORDS = ["sm_120a", "*.cu", "..", "/", "", "\x00", "KG201", "spill", "k:good", "*fp16", "nvcc", "warn",
                "two-way"]
FLOATS = [0.0, -0.0, 0.5, -1.5, 1e-9, 5e-324, 1e308, float("inf"), float("-inf"), float("nan")]


def integer(rng: random.Random, low: int, high: int) -> int:
    """An integer in [low, high], often at an edge or small."""
    roll = rng.random()
    if roll < 0.3:
        return max(low, min(high, rng.choice((low, low + 1, -1, 0, 1, high - 1, high))))
    if roll < 0.7:
        return rng.randint(max(low, -100), min(high, 100))
    return rng.randint(low, high)


def real(rng: random.Random) -> float:
    """Any float: an edge (infinities, NaN, -0.0, subnormal) or a random magnitude."""
    if rng.random() < 0.4:
        return rng.choice(FLOATS)
    return rng.uniform(-1, 1) * 10.0 ** rng.randint(-300, 300)


def scalar(rng: random.Random) -> Any:
    kind = rng.randrange(5)
    if kind == 0:
        return random_text(rng, 12)
    if kind == 1:
        return integer(rng, -10, 10 ** 20)
    if kind == 2:
        return real(rng)
    if kind == 3:
        return rng.random() < 0.5
    return rng.choice(SCALAR_WORDS)


def toml_value(rng: random.Random, leaves: int = 12) -> Any:
    """A scalar, or lists and tables nested to hold at most `leaves` scalars (what a TOML file can say)."""
    left = [leaves]

    def value() -> Any:
        if left[0] <= 1 or rng.random() < 0.5:
            left[0] -= 1
            return scalar(rng)
        if rng.random() < 0.5:
            return [value() for _ in range(rng.randint(0, 4)) if left[0] > 0]
        return {random_text(rng, 8): value() for _ in range(rng.randint(0, 4)) if left[0] > 0}

    return value()


CONFIG_KEYS = ["targets", "triton", "cuda", "select", "extend-select", "ignore", "per-file-ignores", "severity",
               "options", "baseline", "ratchet", "toolchain-change", "cache-dir", "jobs", "timeout", "exclude",
               "extend-exclude", "python-path", "nvcc", "size-slack", "fail-on"]
TRITON_KEYS = ["kernel", "signature", "constexprs", "num_warps", "num_stages", "expect", "pdl", "kind", "variants",
               "shapes", "divisible"]
CUDA_KEYS = ["sources", "flags", "compile_commands", "pdl", "expect", "launch_wrappers", "kind", "compiler"]
# Paths and globs are where the operating system, not kgate, would object first.
PATHS = ["..", "../x", "/tmp", "", ".", "a\x00b", "~", "x/../..", "*.cu", "**/*.cu", "[", "\\", "C:\\x", " ", "sub/",
         "./kgate-baseline.toml"]
CODES = ["KG1", "KG201", "spill", "KG", "launch-guard", "ALL"]


def some(rng: random.Random, make: Callable[[random.Random], T], low: int = 0, high: int = 3) -> list[T]:
    return [make(rng) for _ in range(rng.randint(low, high))]


def pathish(rng: random.Random) -> str:
    return rng.choice(PATHS) if rng.random() < 0.7 else random_text(rng, 8)


def codes(rng: random.Random) -> list[str]:
    return some(rng, lambda r: r.choice(CODES))


def keyed(rng: random.Random, keys: list[str], makers: dict[str, Callable[[random.Random], Any]],
          density: float) -> dict[str, Any]:
    """A table with each of `keys` present at `density`, its value made by its maker (any TOML value if none)."""
    return {key: makers.get(key, toml_value)(rng) for key in keys if rng.random() < density}


def choose(*words: str) -> Callable[[random.Random], str]:
    return lambda rng: rng.choice(words)


# Mostly values of the right shape, so that a table gets past its first key to the checks behind it.
PLAUSIBLE: dict[str, Callable[[random.Random], Any]] = {
    "targets": lambda r: some(r, choose("sm_120a", "sm_90a", "sm_100a"), 1, 3),
    "select": codes, "extend-select": codes, "ignore": codes,
    "per-file-ignores": lambda r: {pathish(r): codes(r) for _ in range(r.randint(0, 2))},
    "severity": lambda r: {r.choice(["KG201", "spill", "x"]): r.choice(["error", "off", "x"])
                           for _ in range(r.randint(0, 2))},
    "options": lambda r: {r.choice(["spill", "launch-guard", "occupancy", "x"]): {
        r.choice(["window", "warn", "kinds", "cliff_fraction", "check_macros"]): toml_value(r)
        for _ in range(r.randint(0, 2))} for _ in range(r.randint(0, 2))},
    "baseline": pathish, "cache-dir": pathish, "nvcc": pathish, "python-path": lambda r: some(r, pathish),
    "exclude": lambda r: some(r, pathish), "extend-exclude": lambda r: some(r, pathish),
    "ratchet": choose("two-way", "tighten", "x"), "fail-on": choose("error", "note", "x"),
    "toolchain-change": choose("fail", "warn", "x"), "jobs": lambda r: integer(r, -1, 10 ** 20),
    "timeout": real, "size-slack": lambda r: integer(r, -5, 50),
    "triton": lambda r: some(r, lambda r: {r.choice(TRITON_KEYS): toml_value(r) for _ in range(r.randint(0, 5))},
                             0, 2),
    "cuda": lambda r: some(r, lambda r: keyed(r, CUDA_KEYS, {
        "sources": lambda r: some(r, pathish, 1, 3), "compile_commands": pathish,
        "compiler": choose("auto", "nvcc", "nvrtc")}, r.random()), 0, 2),
}


def config_table(rng: random.Random) -> dict[str, Any]:
    """A [tool.kgate] table: plausible values only, plausible or arbitrary ones, or arbitrary keys."""
    form = rng.randrange(3)
    if form == 2:
        return {random_text(rng, 12): toml_value(rng) for _ in range(rng.randint(0, 4))}
    makers = PLAUSIBLE if form == 0 else {
        key: lambda r, make=make: make(r) if r.random() < 0.5 else toml_value(r) for key, make in PLAUSIBLE.items()}
    return keyed(rng, CONFIG_KEYS, makers, rng.random())


CONFIG_TABLES = seeded(config_table)
PROJECT = Path(tempfile.mkdtemp(prefix="kgate-fuzz-"))  # configuration files are written and loaded here
atexit.register(shutil.rmtree, PROJECT, True)


@fuzz("config_table")
@given(CONFIG_TABLES)
def test_configuration_tables_raise_only_config_errors(table: dict[str, Any]) -> None:
    try:
        config = parse_config(table, root=PROJECT, source=PROJECT / "kgate.toml")
    except KgateError:
        return
    assert config.timeout > 0 and config.targets


@fuzz("config_file")
@given(st.one_of(mutated(CONFIGS), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))),
       st.sampled_from(["kgate.toml", "pyproject.toml"]), st.sampled_from(["utf-8", "latin-1", "utf-16"]))
def test_configuration_files_raise_only_config_errors(text: str, name: str, encoding: str) -> None:
    path = PROJECT / name
    path.write_bytes(text.encode(encoding, errors="replace"))
    try:
        load_config(path)
    except KgateError:
        pass


@fuzz("baseline")
@given(st.one_of(mutated(BASELINES), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))),
       st.sampled_from(["utf-8", "latin-1"]))
def test_baselines_raise_only_baseline_errors(text: str, encoding: str) -> None:
    try:
        baseline = parse_baseline(text.encode(encoding, errors="replace"), "kgate-baseline.toml")
    except KgateError:
        return
    for pin in baseline.findings.values():
        assert pin.count > 0


# --------------------------------------------------------------------------- cache records


FACTS_RECORD = json.loads(json.dumps(KernelFacts.from_json({
    "kernel": "k:good", "variant": "BLOCK=128,warps=4,stages=3", "target": "sm_120a", "language": "triton",
    "path": "k.py", "line": 6, "kind": "other", "num_warps": 4, "num_stages": 3, "expect": [], "pdl": True,
    "ptx_target": "sm_120a", "entry": {"name": "good", "mma": {"mma.sync": 2}, "has_wait": True,
                                      "has_launch_dependents": False, "global_accesses": 2, "unwaited_accesses": [
                                          {"opcode": "ld.global.u32", "ptx_line": 40,
                                           "loc": {"file": "k.py", "line": 8, "col": 4}}]},
    "resources": {"registers": 8, "spill_stores": 0, "spill_loads": 0, "stack_bytes": 0, "smem_static": 0,
                  "smem_dynamic": 0, "barriers": 0},
    "sass": {"opcodes": {"ACQBULK": 1, "LDG.E": 2}}}).to_json()))
HASH = "0" * 64
COMPILED_RECORD = {"context": {k: v for k, v in FACTS_RECORD.items() if k not in ("ptx_target", "entry", "resources",
                                                                             "sass", "smem_buffers", "smem_per_buffer")},
                   "artifacts": {"ptx": HASH, "ptxas_log": HASH, "ttgir": HASH}, "dynamic_smem": 0}
CUDA_RECORD = {"artifacts": {"ptx": HASH, "ptxas_log": HASH, "sass": HASH}, "sass_symbols": ["_Z1kv"],
               "context": {"root": "/p", "aliases": [], "source": "/p/k.cu", "cwd": "/p", "rel": "k.cu",
                           "target": "sm_120a", "toolchain": {"cuda.nvcc": "13.0"}}}
LINT_RESULT = [[[5, 35, 5, 38, "KG201", "", "autotune key 'n'", "tuned|key", None, []]],
               [[3, 10, False, ["KG201"], "reason", "", False]], ["KG004", "KG201"]]
CORRUPT = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def one_value_replaced(rng: random.Random, text: str) -> Any:
    """The JSON record `text` with one value, at any depth, replaced by an arbitrary JSON value."""
    copy = json.loads(text)
    node = copy
    for _ in range(rng.randint(0, 5)):
        if isinstance(node, dict) and node:
            key: Any = rng.choice(sorted(node))
        elif isinstance(node, list) and node:
            key = rng.randrange(len(node))
        else:
            break
        if not isinstance(node[key], (dict, list)) or rng.random() < 0.5:
            node[key] = toml_value(rng)
            break
        node = node[key]
    return copy


def damaged(record: Any) -> st.SearchStrategy[Any]:
    text = json.dumps(record)
    return seeded(lambda rng: one_value_replaced(rng, text) if rng.random() < 0.5 else toml_value(rng))


@fuzz("records")
@given(damaged(FACTS_RECORD), damaged(COMPILED_RECORD), damaged(CUDA_RECORD), damaged(LINT_RESULT))
def test_damaged_cache_records_are_refused_not_crashed_on(facts: Any, compiled: Any, cuda: Any,
                                                          lint_result: Any) -> None:
    """The cache answers None for a record whose check raises one of CORRUPT: anything else would crash."""
    for check, record in ((check_facts_record, {"kernels": [["good", facts]]}), (check_facts_record, facts),
                          (records.compiled, compiled), (records.cuda, cuda), (records.spans, facts),
                          (records.expansion, facts)):
        try:
            check(record)
        except CORRUPT:
            pass
    try:
        lint_cache._checked(from_json(lint_result))
    except CORRUPT:
        pass


def test_an_undamaged_record_passes_its_check() -> None:
    check_facts_record({"kernels": [["good", FACTS_RECORD]]})
    records.compiled(COMPILED_RECORD)
    records.cuda(CUDA_RECORD)
    assert lint_cache._checked(from_json(LINT_RESULT)).findings[0].code == "KG201"
