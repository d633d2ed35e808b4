"""Readable, stable names for CUDA kernels, and the `__global__` line that defines each.

PTX and the ptxas log name kernels by their Itanium-mangled symbols
(`_Z14rmsnorm_kernelI6__halfLi128EEvPKT_PS1_i`). kgate shows and keys them by
the demangled name without the return type and the parameter list
(`rmsnorm_kernel<__half, 128>`), and without nvcc's per-file anonymous
namespace (`_GLOBAL__N__9008ca95_7_host_cu_...`, demangled as
`(anonymous namespace)`) unless two kernels of one file would then share a name.

Demangling uses libstdc++'s `abi::__cxa_demangle` through ctypes: the
reference implementation of the Itanium C++ ABI that `c++filt` also uses,
present wherever nvcc's host compiler is, in-process (no subprocess per
name) and maintained with GCC. Names that are not mangled (`extern "C"`
kernels) are kept as they are.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fnmatch
import functools
import re
from typing import Any

from kgate.collect.cpp_text import balanced, blank, split_arguments

ANONYMOUS = "(anonymous namespace)::"


@functools.lru_cache(maxsize=1)
def _demangler() -> tuple[Any, Any] | None:
    try:
        libstdcxx = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    function = libstdcxx.__cxa_demangle
    function.restype = ctypes.c_void_p
    function.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    libc.free.argtypes = [ctypes.c_void_p]
    return function, libc.free


@functools.lru_cache(maxsize=4096)
def demangle(symbol: str) -> str:
    """The demangled form of a symbol (with its parameter list), or the symbol itself."""
    if not symbol.startswith("_Z"):
        return symbol
    found = _demangler()
    if found is None:
        return symbol
    function, free = found
    status = ctypes.c_int(0)
    pointer = function(symbol.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not pointer:
        return symbol
    try:
        return ctypes.string_at(pointer).decode(errors="replace")
    finally:
        free(pointer)


def short_name(symbol: str) -> str:
    """`rmsnorm_kernel<__half, 128>`: no return type, no parameters (anonymous namespace kept). A symbol the
    demangler does not take (a CUTLASS GEMM's, thousands of characters long) is named by what leads it, its
    template arguments by a digest of the symbol: `cutlass::device_kernel<#3f2a9c1e>`."""
    text = demangle(symbol)
    if text == symbol:
        return _leading_name(symbol) or symbol
    return strip_return_type(_strip_parameters(text)).strip()


def _leading_name(symbol: str) -> str | None:
    """The qualified name that leads a mangled symbol (`_ZN7cutlass13device_kernelI...` is `cutlass::device_kernel`),
    with a digest of the whole symbol standing for its template arguments (`template_head`)."""
    import hashlib

    head = template_head(symbol)
    if head is None:
        return None
    return f"{'::'.join(head)}<#{hashlib.sha256(symbol.encode()).hexdigest()[:8]}>"


def template_head(symbol: str) -> tuple[str, ...] | None:
    """The plain names that lead a mangled template instantiation up to its first template arguments
    (`_ZN7cutlass13device_kernelI...` gives `cutlass`, `device_kernel`; `_ZN5OuterIiE6kernelEv`, a kernel of a class
    template, `Outer`); None where the symbol is no instantiation read so (`_Z6kernelP5ArrayIfE` takes a template's
    type but is none). Read from the symbol, since the longest (a CUTLASS GEMM's) are more than the system's
    demangler takes."""
    if not symbol.startswith("_Z"):
        return None
    at = 3 if symbol.startswith("_ZN") else 2
    names: list[str] = []
    while (found := re.match(r"\d+", symbol[at:])) is not None:
        if len(found.group()) > 6:
            return None  # no name is that long: not a mangled name
        start = at + found.end()
        end = start + int(found.group())
        name = symbol[start:end]
        if len(name) < int(found.group()) or not name.replace("_", "a").isalnum():
            return None
        names.append(name)
        at = end
        if symbol[at:at + 1] == "I":
            return tuple(names)
    return None


def strip_return_type(text: str) -> str:
    """A template function's demangled name without the return type it starts with: `void k<1>` is `k<1>`, and
    so is `std::enable_if<(N>0), void>::type k<1>` (a SFINAE-constrained kernel). The name is what follows the
    last space outside brackets; inside parentheses `<` and `>` are comparisons, not brackets."""
    angle = paren = 0
    cut = -1
    for index, ch in enumerate(text):
        if ch in "([":
            paren += 1
        elif ch in ")]":
            paren = max(paren - 1, 0)
        elif paren == 0 and ch == "<":
            angle += 1
        elif paren == 0 and ch == ">":
            angle = max(angle - 1, 0)
        elif ch == " " and angle == 0 and paren == 0:
            cut = index
    if cut < 0:
        return text
    head, name = text[:cut], text[cut + 1:]
    # `operator<` and friends keep their words ("operator()" has no space outside brackets).
    return text if not name or head.endswith("operator") else name


def _strip_parameters(text: str) -> str:
    """Drop the trailing balanced `(...)` parameter list."""
    if not text.endswith(")"):
        return text
    depth = 0
    for index in range(len(text) - 1, -1, -1):
        ch = text[index]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                return text[:index]
    return text


def display_names(symbols: list[str]) -> dict[str, str]:
    """Symbol -> display name for the kernels of one file: unique, anonymous namespace only where needed."""
    full = {symbol: short_name(symbol) for symbol in symbols}
    plain = {symbol: name.replace(ANONYMOUS, "") for symbol, name in full.items()}
    counts: dict[str, int] = {}
    for name in plain.values():
        counts[name] = counts.get(name, 0) + 1
    out = {}
    for symbol in symbols:
        name = plain[symbol] if counts[plain[symbol]] == 1 else full[symbol]
        out[symbol] = name
    # Still equal (two overloads of one template instantiation): keep the parameter lists.
    seen: dict[str, int] = {}
    for name in out.values():
        seen[name] = seen.get(name, 0) + 1
    for symbol, name in list(out.items()):
        if seen[name] > 1:
            text = demangle(symbol).replace(ANONYMOUS, "")
            parameters = text[len(_strip_parameters(text)):]
            out[symbol] = strip_return_type(_strip_parameters(text)) + parameters
    return out


def base_name(display: str) -> str:
    """`ns::rmsnorm_kernel<__half, 128>` -> `rmsnorm_kernel`: the identifier written at launch sites."""
    head = display.split("<", 1)[0].split("(", 1)[0]
    return head.rsplit("::", 1)[-1].strip()


def name_forms(display: str) -> tuple[str, ...]:
    """The forms a configured glob may match: as shown, without namespaces, and without template arguments."""
    unqualified = _unqualified(display)
    forms = dict.fromkeys((display, unqualified, base_name(display), display.split("<", 1)[0]))
    return tuple(forms)


def _unqualified(display: str) -> str:
    head, angle, rest = display.partition("<")
    return head.rsplit("::", 1)[-1] + angle + rest


# `__global__` then anything up to the kernel's name and its parameter list.
_GLOBAL = re.compile(r"\b__global__\b")


def global_definitions(text: str) -> dict[str, list[int]]:
    """Kernel identifier -> lines of its `__global__` declarations or definitions, in file order."""
    out: dict[str, list[int]] = {}
    for match in _GLOBAL.finditer(text):
        name = _declared_name(text, match.end())
        if name:
            out.setdefault(name, []).append(text.count("\n", 0, match.start()) + 1)
    return out


def global_parameters(text: str) -> dict[int, tuple[str, ...]]:
    """Line of each `__global__` -> the names of the parameters of the function it declares, as the source writes
    them, in order (an unnamed one is ""); a declaration whose list cannot be read is left out. The PTX names a
    kernel's parameters `<symbol>_param_N` only: these are the names a user knows them by."""
    code = blank(text).code
    out: dict[int, tuple[str, ...]] = {}
    for match in _GLOBAL.finditer(code):
        opening = _parameter_list(code, match.end())
        if opening is None:
            continue
        inner = code[opening + 1:balanced(code, opening) - 1]
        names = () if inner.strip() in ("", "void") else tuple(_parameter_name(p) for p in split_arguments(inner))
        out[code.count("\n", 0, match.start()) + 1] = names
    return out


_NAMED = re.compile(r"(?:[\w>*&\]\s])\s*([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$")
_NOT_NAMES = frozenset({"const", "volatile", "int", "unsigned", "signed", "long", "short", "char", "float", "double",
                        "bool", "void", "__restrict__", "__restrict", "restrict", "__grid_constant__", "struct"})


def _parameter_name(parameter: str) -> str:
    """The name one parameter declares: the identifier it ends with (before an array's brackets and a default
    value), unless that is part of its type (`int`, `const float*`)."""
    head = parameter.split("=", 1)[0].strip()
    found = _NAMED.search(" " + head)
    if found is None or found.group(1) in _NOT_NAMES:
        return ""
    before = head[:found.start(1) - 1].strip()  # one word alone is a type (`T`), a name needs a type before it
    return found.group(1) if before else ""


def _parameter_list(text: str, start: int) -> int | None:
    """The index of the `(` that opens the parameter list of the declaration starting at `start`."""
    name = _declared_name(text, start)
    if name is None:
        return None
    found = re.compile(rf"\b{re.escape(name)}\s*\(").search(text, start)
    return found.end() - 1 if found else None


def _declared_name(text: str, start: int) -> str | None:
    """The identifier before the first top-level `(` after `__global__`, skipping attribute calls."""
    index = start
    depth_angle = 0
    end = min(len(text), start + 2000)
    while index < end:
        ch = text[index]
        if ch in ";{":
            return None
        if ch == "<":
            depth_angle += 1
        elif ch == ">":
            depth_angle = max(0, depth_angle - 1)
        elif ch == "(" and depth_angle == 0:
            head = text[start:index]
            word = re.search(r"([A-Za-z_]\w*)\s*$", head)
            if word and word.group(1) in ("__launch_bounds__", "__maxnreg__", "__cluster_dims__",
                                          "alignas", "__attribute__", "__declspec"):
                index = _skip_parens(text, index)
                start = index
                continue
            return word.group(1) if word else None
        index += 1
    return None


def _skip_parens(text: str, index: int) -> int:
    depth = 0
    for position in range(index, len(text)):
        if text[position] == "(":
            depth += 1
        elif text[position] == ")":
            depth -= 1
            if depth == 0:
                return position + 1
    return len(text)


def definition_line(definitions: dict[str, list[int]], name: str, hint: int | None) -> int | None:
    """The `__global__` line of `name`: the last one at or before `hint` (a line inside its body)."""
    lines = definitions.get(name)
    if not lines:
        return None
    if hint is not None:
        before = [line for line in lines if line <= hint]
        if before:
            return before[-1]
    return lines[-1]


def matches(display: str, patterns: tuple[str, ...] | list[str]) -> bool:
    """Whether a kernel's display name matches a glob in any of its forms (with or without namespaces/templates)."""
    forms = name_forms(display)
    return any(fnmatch.fnmatchcase(form, pattern) for pattern in patterns for form in forms)
