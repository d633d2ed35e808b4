"""The integer a C++ constant expression in a source file stands for, where the file alone settles it.

A launch's dynamic shared memory is written as an expression: `96 * 1024`, `SMEM_BYTES`,
`STAGES * (BM + BN) * BK * sizeof(half)`. Its names are read from what the file (blanked: comments and strings
are spaces) and the project headers it includes define: an object-like `#define NAME expr`, a
`[static] [constexpr|const] <integer type> NAME = expr;` (also `{expr}` and `(expr)` initialisers), an enumerator,
or a plain `int NAME = expr;` in a function that nothing changes again (assigns, increments, takes the address of,
hands to a call or binds to a reference: a function may take it by reference). A name
declared in a function's body is seen in that body only, and shadows the file's own; a qualified name
(`Cfg::kSmem`) is looked up by its last part. `sizeof` of the built-in and CUDA vector types is known; the
arithmetic is C's on integers (`/` truncates, shifts, `%`, bitwise operators, comparisons one at a time, the
ternary operator on a settled condition), C's literals (hexadecimal, binary, octal, `1'024`) with their suffixes
(`u`, `l`, `ull`) and casts to an integer type allowed. Anything else leaves the expression unsettled (None,
never a guess): a function call, a template (of any type) or function parameter of the name, a structured binding,
a variable outside any function (another file may assign it), a value its declared type cannot hold, a name
defined twice with two
values, one a preprocessor conditional asks about (`#ifndef SMEM`: the build may give it with `-D`) unless the
compile's flags do define it (then it is theirs, as a name the file does not define is), a run-time
variable, a step past `int`, an unsigned value that wraps.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from kgate.collect.cpp_text import balanced, split_arguments

# Bytes of the types `sizeof` is asked of in shared-memory sizes.
SIZES = {
    "char": 1, "signed char": 1, "unsigned char": 1, "bool": 1, "int8_t": 1, "uint8_t": 1,
    "__nv_fp8_e4m3": 1, "__nv_fp8_e5m2": 1,
    "short": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2, "half": 2, "__half": 2, "nv_bfloat16": 2,
    "__nv_bfloat16": 2, "cutlass::half_t": 2, "cutlass::bfloat16_t": 2, "at::Half": 2, "at::BFloat16": 2,
    "int": 4, "unsigned": 4, "unsigned int": 4, "int32_t": 4, "uint32_t": 4, "float": 4, "half2": 4, "__half2": 4,
    "nv_bfloat162": 4, "__nv_bfloat162": 4,
    "long long": 8, "unsigned long long": 8, "int64_t": 8, "uint64_t": 8, "size_t": 8, "double": 8, "float2": 8,
    "int2": 8, "uint2": 8, "long": 8, "unsigned long": 8,
    "float4": 16, "int4": 16, "uint4": 16, "double2": 16,
}

_INTEGER_TYPE = (r"(?:unsigned\s+|signed\s+)?(?:int|long\s+long|long|short|char|size_t|u?int(?:8|16|32|64)_t|"
                 r"unsigned|auto|index_t|uint)")
# `[static] [inline] (constexpr|const) <type> NAME = expr;` and `constexpr static ...`; `{expr}` and `(expr)` too.
_DECLARED = re.compile(r"(?P<qualifiers>(?:\b(?:static|inline|constexpr|const|__device__|__host__|__constant__)\s+)*)"
                       r"\b(?P<type>" + _INTEGER_TYPE + r")\s+(?P<const>const\s+)?(?P<name>[A-Za-z_]\w*)\s*"
                       r"(?:=\s*(?P<value>[^;{}]+?)|\{(?P<braced>[^;{}]*)\}|\((?P<paren>[^;{}]*)\))\s*;")
# A declaration with no value: a parameter (`int smem)`, `size_t SMEM>` of a template), `int smem;`.
_BARE = re.compile(r"\b" + _INTEGER_TYPE + r"\s*[&*]*\s*(?:const\s+)?(?P<name>[A-Za-z_]\w*)\s*(?=[,)>;:\[])")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)(?![\w(])(?P<value>(?:[^\n]*\\\n)*[^\n]*)",
                     re.MULTILINE)
# A name a preprocessor conditional asks about is one the build may define (`-DSMEM=...`): never settled.
_TESTED = re.compile(r"^[ \t]*#[ \t]*(?:ifn?def[ \t]+(?P<name>[A-Za-z_]\w*)|(?:el)?if\b(?P<condition>[^\n]*))",
                     re.MULTILINE)
_DEFINED_TEST = re.compile(r"\bdefined\s*\(?\s*([A-Za-z_]\w*)")
_ENUM = re.compile(r"\benum\b(?:\s+(?:class|struct)\b)?[\w\s:]*\{")
# What opens a block that is not a scope of its own: `namespace`, a class (`struct K : Base {`), `extern "C"`; not a
# function whose template's parameters say `class` (`template <class T> void f(int n) {`).
_SCOPE_HEAD = re.compile(r"\b(?:namespace|struct|class|union|enum)\b[^;{}()]*$|\bextern\s*\"")
_SIZEOF = re.compile(r"\bsizeof\s*\(\s*([A-Za-z_][\w:\s]*?)\s*\)")
# A qualified name's qualifiers (`Cfg::kSmem`, `::kSmem`): the name is looked up as written after them.
_QUALIFIED = re.compile(r"(?:(?<![\w:])::\s*(?:[A-Za-z_]\w*\s*::\s*)*|(?:\b[A-Za-z_]\w*\s*::\s*)+)(?=[A-Za-z_])")
_CAST = re.compile(r"\(\s*(?:unsigned\s+|signed\s+)?(?:int|long\s+long|long|size_t|u?int(?:32|64)_t|unsigned)"
                   r"\s*\)|\bstatic_cast\s*<\s*(?:unsigned\s+|signed\s+)?(?:int|long\s+long|long|size_t|"
                   r"u?int(?:32|64)_t|unsigned)\s*>")
# A C integer literal: hexadecimal, binary, octal or decimal, with digit separators (`1'024`) and a suffix.
_LITERAL = re.compile(r"(?<![\w.'])(?:0[xX](?P<hex>[0-9a-fA-F](?:'?[0-9a-fA-F])*)|0[bB](?P<bin>[01](?:'?[01])*)|"
                      r"(?P<dec>[0-9](?:'?[0-9])*))(?P<suffix>[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)?(?![\w.'])")
_TERNARY = re.compile(r"^(?P<test>[^?:]+)\?(?P<yes>[^?:]+):(?P<no>[^?:]+)$")
_LIMIT = 1 << 31  # C's `int`: a value (or a step on the way) outside it is not a shared-memory size: not settled
# The values a narrower or an unsigned type holds: a constant declared with one and given a value outside it holds
# another (`unsigned short S = 65536 + 1024` is 1024), which is not guessed.
_RANGES = {
    **dict.fromkeys(("char", "signed char", "int8_t"), (-(1 << 7), 1 << 7)),
    **dict.fromkeys(("unsigned char", "uint8_t"), (0, 1 << 8)),
    **dict.fromkeys(("short", "signed short", "int16_t"), (-(1 << 15), 1 << 15)),
    **dict.fromkeys(("unsigned short", "uint16_t"), (0, 1 << 16)),
    **dict.fromkeys(("unsigned", "unsigned int", "uint32_t", "uint", "unsigned long", "unsigned long long",
                     "uint64_t", "size_t"), (0, _LIMIT)),
}
# Unary operators written as a power of a marker: Python's `**` binds its right operand as C's unary operators do.
# `_UNSIGNED`: an unsigned literal, cast or `sizeof`, whose value below zero is one C wraps past any size.
_NOT, _CASTED, _UNSIGNED = "_kgate_not_", "_kgate_cast_", "_kgate_unsigned_"


class _Definition(NamedTuple):
    value: str | None  # the text of its value; None: a declaration with none (a parameter)
    text: int  # which of the texts
    at: int  # offset of the name
    scope: tuple[int, int] | None  # the block (function body) it is local to; None: the file's scope
    type: str = "int"  # the integer type declared (`short`, `uint8_t`...): a value outside its range is not kept
    variable: bool = False  # a variable (not `const`) outside any function: its value is no constant


class Constants:
    """The names one file's text (with its headers') defines, and the integers expressions of them give."""

    def __init__(self, texts: Iterable[str] | Callable[[], Iterable[str]], given: dict[str, str] | None = None
                 ) -> None:
        """`texts`: the texts (blanked), or a function giving them, called once an expression names a constant;
        the last is the file's own (the one `value`'s `at` is an offset in). `given`: the macros the compile's
        flags define (`-DSMEM=98304`: `given_macros`), which a preprocessor conditional asks about (`#ifndef SMEM`)
        or the texts do not define."""
        self.texts = texts
        self.given = given or {}
        self._defined: tuple[dict[str, list[_Definition]], set[str], set[str], int] | None = None
        self.values: dict[tuple[str, int, int], int | None] = {}

    @property
    def definitions(self) -> tuple[dict[str, list[_Definition]], set[str], set[str], int]:
        """Each name's definitions, the names no text settles by itself (changed after their declaration; asked
        about by a preprocessor conditional), and the index of the file's own text."""
        if self._defined is None:
            texts = list(self.texts() if callable(self.texts) else self.texts)
            self._defined = (*_defined(texts), len(texts) - 1)
        return self._defined

    def value(self, expression: str, at: int | None = None) -> int | None:
        """The integer `expression` gives, or None where the file does not settle it; `at`: its offset in the
        file's own text, where the names of the function around it are seen (else only those of the file's
        scope)."""
        return _evaluate(expression, lambda name, seen: self._name(name, seen, at), set())

    def _name(self, name: str, seen: set[str], at: int | None, text: int | None = None) -> int | None:
        if name in ("true", "false"):
            return int(name == "true")
        found, changed, tested, own = self.definitions
        if name in seen or name in changed:
            return None
        if name in self.given and (name in tested or name not in found):
            # The build defines it: `#ifndef SMEM` then skips the file's default, and a name the file does not
            # define is the flag's.
            key = (name, -1, -1)
            if key not in self.values:
                self.values[key] = _evaluate(self.given[name], lambda inner, again: self._name(inner, again, None),
                                             seen | {name})
            return self.values[key]
        if name in tested:
            return None
        text = own if text is None else text
        visible = self._visible(name, at, text)
        if not visible or any(d.value is None for d in visible) or len({d.value for d in visible}) > 1:
            return None
        first = visible[0]
        key = (name, first.text, first.scope[0] if first.scope else -1)
        if key not in self.values:
            value = _evaluate(first.value or "", lambda inner, again: self._name(inner, again, first.at, first.text),
                              seen | {name})
            low, high = _RANGES.get(first.type, (-_LIMIT, _LIMIT))
            self.values[key] = value if value is None or low <= value < high else None  # C keeps another value
        return self.values[key]

    def _visible(self, name: str, at: int | None, text: int) -> list[_Definition]:
        """The definitions of `name` seen at offset `at` of text `text`: the innermost block's locals (from their
        declaration on), which shadow the file's own; else the file's."""
        found = self.definitions[0]
        visible = [d for d in found.get(name, ()) if d.scope is None or (
            at is not None and d.text == text and d.at < at < d.scope[1])]
        local = [d for d in visible if d.scope is not None]
        if local:
            inner = max(d.scope[0] for d in local if d.scope is not None)
            visible = [d for d in local if d.scope is not None and d.scope[0] == inner]
        return visible

    def expanded(self, expression: str, at: int | None = None) -> str | None:
        """`expression` as the compiler may evaluate it away from the function around `at`: each name a local of
        that function gives (`int smem = int(sizeof(typename K::SharedStorage));`) replaced by its value's text,
        in parentheses, recursively, and each macro the compile's flags define by its value; every other name is
        kept for the compiler (a constant, type or macro of the file's scope, a template's parameter). None where
        a name's value there is not one text (a local changed after its declaration, or declared twice with two
        values, a name a preprocessor conditional asks about that the flags do not define, a recursive one) or is
        no constant (a variable declared outside any function)."""
        return self._expanded(_squeeze(expression), at, None, frozenset())

    def _expanded(self, expression: str, at: int | None, text: int | None, seen: frozenset[str]) -> str | None:
        found, changed, tested, own = self.definitions
        text = own if text is None else text
        out: list[str] = []
        last = 0
        operands = [(m.end(), balanced(expression, m.end() - 1)) for m in _OPERAND.finditer(expression)]
        for match in _NAME.finditer(expression):
            name = match.group(0)
            if name in _WORDS or _member(expression, match.start()) or expression.startswith("::", _skip(
                    expression, match.end())):
                continue  # a keyword, a name qualified by another, or one that qualifies a name (a type's)
            if name in seen:
                return None
            value: str | None
            if name in self.given and (name in tested or name not in found):
                value = self._expanded(_squeeze(self.given[name]), None, None, seen | {name})
            elif name in tested:
                return None
            else:
                visible = self._visible(name, at, text)
                if any(d.variable for d in visible):
                    return None  # a variable of the file's scope: no constant, to the compiler either
                local = [d for d in visible if d.scope is not None]
                if not local or any(d.value is None for d in local):
                    continue  # the compiler's to look up (a local without a value: the caller refuses it)
                if name in changed or len({d.value for d in local}) > 1 or any(
                        start <= match.start() < end for start, end in operands):
                    return None  # a variable's type is not its value's: `sizeof(n)` of a `long n = 5`
                value = self._expanded(local[0].value or "", local[0].at, local[0].text, seen | {name})
            if value is None:
                return None
            out += [expression[last:match.start()], f"({value})"]
            last = match.end()
        return "".join(out) + expression[last:]


def given_macros(flags: Iterable[str], cwd: str = ".") -> dict[str, str]:
    """The macros a compile's flags define, with their values: `-DSMEM=98304`, `-D SMEM=98304`, `--define-macro
    SMEM=98304` (`-DFLAG` is 1); `-USMEM` takes one away again. The flags an options file holds (`--options-file F`,
    `-optf F`; relative to `cwd`, where nvcc runs) stand where it is named, as nvcc reads them."""
    out: dict[str, str] = {}
    words = _with_option_files(list(flags), cwd, 0)
    for index, flag in enumerate(words):
        value: str | None = None
        undefine = False
        if flag in ("-D", "--define-macro") and index + 1 < len(words):
            value = words[index + 1]
        elif flag.startswith("--define-macro="):
            value = flag.split("=", 1)[1]
        elif flag.startswith("-D") and len(flag) > 2:
            value = flag[2:]
        elif flag.startswith("-U") and len(flag) > 2:
            value, undefine = flag[2:], True
        elif flag in ("-U", "--undefine-macro") and index + 1 < len(words):
            value, undefine = words[index + 1], True
        if value is None:
            continue
        name, _, given = value.partition("=")
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            continue
        if undefine:
            out.pop(name, None)
        else:
            out[name] = given if "=" in value else "1"
    return out


_OPTION_FILES = ("--options-file", "-optf")


def _with_option_files(words: list[str], cwd: str, depth: int) -> list[str]:
    """`words` with each options file they name replaced by the words it holds (a file that cannot be read: none)."""
    if depth > 4 or not any(w.startswith(_OPTION_FILES) for w in words):
        return words
    out: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        named = None
        if word in _OPTION_FILES and index + 1 < len(words):
            named, index = words[index + 1], index + 1
        elif word.startswith(tuple(f"{o}=" for o in _OPTION_FILES)):
            named = word.split("=", 1)[1]
        if named is None:
            out.append(word)
        else:
            for name in filter(None, named.split(",")):
                out += _with_option_files(_option_words(os.path.join(cwd, name)), cwd, depth + 1)
        index += 1
    return out


def _option_words(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return shlex.split(handle.read(1 << 20))
    except (OSError, ValueError):
        return []


def _defined(texts: list[str]) -> tuple[dict[str, list[_Definition]], set[str], set[str]]:
    """The definitions of names in `texts` (`Constants`), the names they change (assigned after their declaration:
    `name = `, `name += `, `++name`, `&name`; a variable, not `const`, handed to a call or bound to a reference,
    which may change it there), and the names a preprocessor conditional asks about (the build may define them)."""
    found: dict[str, list[_Definition]] = {}
    unsettled: set[str] = set()
    tested: set[str] = set()
    for index, code in enumerate(texts):
        declared: set[int] = set()
        variables: set[int] = set()  # the offsets of declarations that are not `const`: variables
        pending: list[tuple[str, str | None, int, bool, str]] = []

        def add(name: str, value: str | None, at: int, local: bool = True, kind: str = "int") -> None:
            pending.append((name, value, at, local, kind))

        for match in _DEFINE.finditer(code):
            add(match.group("name"), _squeeze(match.group("value")), match.start("name"), local=False)
        for match in _DECLARED.finditer(code):
            value = match.group("value") or match.group("braced") or match.group("paren")
            if value is not None and value.strip():
                add(match.group("name"), _squeeze(value), match.start("name"), kind=" ".join(match["type"].split()))
                declared.add(match.start("name"))
                if not match.group("const") and not re.search(r"\bconst(?:expr)?\b", match.group("qualifiers")):
                    variables.add(match.start("name"))
        for match in _BARE.finditer(code):
            if match.group("name") not in _KEYWORDS:
                add(match.group("name"), None, match.start("name"), local=False)
        for name, at in _bound_names(code):  # template parameters of any type, structured bindings
            add(name, None, at, local=False)
        for match in _ENUM.finditer(code):
            body = code[match.end():balanced(code, match.end() - 1, "{", "}") - 1]
            previous: str | None = "-1"  # the first enumerator without a value is 0
            offset = match.end()
            for item in body.split(","):
                enumerator = re.match(r"\s*([A-Za-z_]\w*)\s*(?:=(.*))?$", item, re.DOTALL)
                if enumerator is not None:
                    given = enumerator.group(2)
                    value = _squeeze(given) if given is not None else \
                        f"({previous}) + 1" if previous is not None else None
                    add(enumerator.group(1), value, offset + enumerator.start(1))
                    declared.add(offset + enumerator.start(1))
                    previous = value
                else:
                    previous = None
                offset += len(item) + 1
        scopes = _scopes(code, sorted(at for _name, _value, at, local, _kind in pending if local))
        for name, value, at, local, kind in pending:
            scope = scopes.get(at) if local else None
            variable = at in variables and scope is None
            if variable:
                value = None  # a variable outside any function: another file, or any function, may change it
            found.setdefault(name, []).append(_Definition(value, index, at, scope, kind, variable))
        for match in _TESTED.finditer(code):
            if match.group("name"):
                tested.add(match.group("name"))
            else:
                tested.update(_DEFINED_TEST.findall(match.group("condition") or ""))
        for match in _CHANGED.finditer(code):
            name = match.group("name") or match.group("before")
            if name and not (match.group("name") and match.start("name") in declared):
                unsettled.add(name)
        names = {name for name, _value, at, _local, _kind in pending if at in variables}
        if names:  # only a variable can be changed through a reference
            unsettled.update(name for name in _handed_on(code) if name in names)
    return found, unsettled, tested


# A template's parameter list, and a structured binding's names (`auto& [bytes, stages] = ...`).
_TEMPLATE = re.compile(r"\btemplate\s*<")
_BINDING = re.compile(r"\bauto\s*[&*]*\s*\[(?P<names>[^\]\[]*)\]\s*(?==|\{|:)")


def _bound_names(code: str) -> Iterator[tuple[str, int]]:
    """The names a template's parameter list or a structured binding declares, with their offsets: each one a
    value the file does not settle (a template argument, an element of what is bound), whatever its type
    (`bool kBig`, `T N`, `auto kSmem`)."""
    for match in _TEMPLATE.finditer(code):
        start = match.end() - 1
        end = _angle_end(code, start)
        offset = start + 1
        for parameter in split_arguments(code[start + 1:end - 1]):
            head = parameter.split("=", 1)[0]
            names = list(re.finditer(r"[A-Za-z_]\w*", head))
            if len(names) > 1 and names[-1].group(0) not in _KEYWORDS:
                yield names[-1].group(0), offset + names[-1].start()
            offset += len(parameter) + 1
    for match in _BINDING.finditer(code):
        for name in re.finditer(r"[A-Za-z_]\w*", match.group("names")):
            yield name.group(0), match.start("names") + name.start()


def _angle_end(code: str, start: int) -> int:
    """Index just past the `>` closing the `<` at `start` (a `>` inside parentheses compares)."""
    depth = parens = 0
    for index in range(start, min(len(code), start + 4096)):
        ch = code[index]
        if ch in "([":
            parens += 1
        elif ch in ")]":
            parens -= 1
        elif parens <= 0 and ch == "<":
            depth += 1
        elif parens <= 0 and ch == ">":
            depth -= 1
            if depth == 0:
                return index + 1
        elif ch in ";{}":
            break
    return start + 1


# A name handed to a call as a whole argument (`pick(bytes)`, `std::swap(bytes, other)`, `Holder h(bytes)`), read
# into (`std::cin >> bytes`), or bound to a reference (`int& r = bytes;`): a function that takes it by reference may
# change it.
_ARGUMENT = re.compile(r"(?<=[(,])\s*(?P<name>[A-Za-z_]\w*)\s*(?=[,)])")
_READ_INTO = re.compile(r"(?<![>])>>\s*(?P<name>[A-Za-z_]\w*)\b(?!\s*[(\[.])")
_REFERENCED = re.compile(r"&\s*[A-Za-z_]\w*\s*(?:=|\{|\()\s*(?P<name>[A-Za-z_]\w*)\s*[;})]")
_NOT_CALLS = {"if", "while", "for", "switch", "return", "sizeof", "decltype", "alignof", "case", "noexcept"}
# Calls that take their arguments by value (or by const reference): a size handed to them is not changed there.
_BY_VALUE = {"printf", "fprintf", "min", "max", "dim3", "assert", "TORCH_CHECK", "cudaFuncSetAttribute",
             "cudaLaunchKernelEx", "cudaLaunchKernelExC", "cudaLaunchKernel", "cudaLaunchCooperativeKernel",
             "cudaMalloc", "cudaMemset", "cudaMemsetAsync", "cudaMemcpy", "cudaMemcpyAsync"}


def _handed_on(code: str) -> set[str]:
    """The names a call may change through a reference (`_ARGUMENT`, `_READ_INTO`, `_REFERENCED`). The arguments of
    a kernel launch (`k<<<g, b>>>(bytes)`) and of a parenthesised expression are values, not references."""
    out = {m.group("name") for m in _READ_INTO.finditer(code)} | {m.group("name") for m in _REFERENCED.finditer(code)}
    for match in _ARGUMENT.finditer(code):
        opening = _opening(code, match.start())
        if opening is None:
            continue
        before = code[max(0, opening - 64):opening].rstrip()
        callee = re.search(r"(?:[A-Za-z_]\w*|>|\)|\])$", before)
        if callee is None or before.endswith(">>>") or callee.group(0) in _NOT_CALLS | _BY_VALUE:
            continue
        out.add(match.group("name"))
    return out


def _opening(code: str, position: int) -> int | None:
    """Offset of the `(` of the call whose argument list `position` is in (None where the statement holds none)."""
    depth = 0
    for index in range(position - 1, max(-1, position - 4096), -1):
        ch = code[index]
        if ch in ")]":
            depth += 1
        elif ch in "([":
            if depth == 0:
                return index if ch == "(" else None
            depth -= 1
        elif ch in ";{}":
            return None
    return None


_KEYWORDS = {"const", "constexpr", "static", "inline", "volatile", "return", "sizeof", "unsigned", "signed", "long",
             "short", "int", "char"}
# A name changed after its declaration: assigned (`name = `, `name += `, not `==`), incremented (`++name`,
# `name--`) or its address taken (`&name`, not `a && name` nor `a & name`).
_CHANGED = re.compile(r"\b(?P<name>[A-Za-z_]\w*)\s*(?:(?:[-+*/%&|^]|<<|>>)?=(?!=)|\+\+|--)|"
                      r"(?:\+\+|--|(?:^|(?<=[=(,{;:?!]))\s*&)\s*(?P<before>[A-Za-z_]\w*)", re.MULTILINE)


def _scopes(code: str, positions: list[int]) -> dict[int, tuple[int, int]]:
    """For each of the (sorted) offsets, the innermost `{...}` block around it that is a scope of its own (a
    function's or a statement's body, not a namespace's, a class's or an enum's), where there is one."""
    braces = [(m.start(), m.group(0)) for m in re.finditer(r"[{}]", code)]
    ends: dict[int, int] = {}
    opened: list[int] = []
    for at, brace in braces:
        if brace == "{":
            opened.append(at)
        elif opened:
            ends[opened.pop()] = at + 1
    out: dict[int, tuple[int, int]] = {}
    stack: list[tuple[int, bool]] = []  # the blocks open at the scan's point: (start, a scope of its own)
    own: list[int] = []  # the starts of those that are scopes of their own
    index = 0
    for at in positions:
        while index < len(braces) and braces[index][0] < at:
            start, brace = braces[index]
            index += 1
            if brace == "{":
                head = max(code.rfind(mark, 0, start) for mark in ";{}") + 1
                scope = not _SCOPE_HEAD.search(code, head, start)
                stack.append((start, scope))
                if scope:
                    own.append(start)
            elif stack:
                start, scope = stack.pop()
                if scope:
                    own.pop()
        if own:
            out[at] = (own[-1], ends.get(own[-1], len(code)))
    return out


_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*")
# `sizeof x`, `sizeof(x)`, `alignof(T)`, `decltype(x)`: what follows is an operand whose type counts, not a value.
_OPERAND = re.compile(r"\b(?:sizeof|alignof|__alignof__|decltype)\s*\(")
# The words of C++ a size expression may hold that name nothing: keywords, built-in types, casts.
_WORDS = frozenset({
    "sizeof", "alignof", "alignas", "typename", "template", "const", "volatile", "unsigned", "signed", "int", "long",
    "short", "char", "bool", "float", "double", "void", "true", "false", "nullptr", "static_cast", "decltype",
    "auto", "__alignof__", "struct", "class", "union", "enum",
})


def _member(text: str, at: int) -> bool:
    """Whether the name at `at` is qualified (`A::name`) or a member (`a.name`, `a->name`)."""
    before = text[:at].rstrip()
    return before.endswith(("::", ".", "->"))


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _squeeze(text: str) -> str:
    return " ".join(text.replace("\\\n", " ").split())


def _literal(match: re.Match[str]) -> str:
    value = _digits(match)
    return f"({_UNSIGNED} ** {value})" if "u" in (match.group("suffix") or "").lower() else value


def _digits(match: re.Match[str]) -> str:
    if match.group("hex") is not None:
        return str(int(match.group("hex").replace("'", ""), 16))
    if match.group("bin") is not None:
        return str(int(match.group("bin").replace("'", ""), 2))
    digits = match.group("dec").replace("'", "")
    if len(digits) > 1 and digits.startswith("0"):
        return str(int(digits, 8)) if set(digits) <= set("01234567") else "0x"  # `08`: no C literal
    return digits


def _evaluate(expression: str, name: object, seen: set[str]) -> int | None:
    text = _squeeze(expression)
    if not text or "**" in text or re.search(r"\b_kgate_", text):
        return None
    text = _SIZEOF.sub(_sizeof, text)
    if "sizeof" in text:
        return None
    text = _QUALIFIED.sub("", text)
    text = _CAST.sub(lambda m: f" {_UNSIGNED if re.search(r'unsigned|size_t|uint', m.group(0)) else _CASTED} ** ",
                     _LITERAL.sub(_literal, text))
    # C++'s alternative tokens are its operators; what Python reads and C does not (`1_024`, `0o7`, `1e3`, `x if y
    # else z`) is no C expression.
    text = re.sub(r"\band\b", "&&", re.sub(r"\bor\b", "||", re.sub(r"\bnot\b", "!", text)))
    if re.search(r"\b\d+[A-Za-z_.]|\.\d|\b(?:if|else|in|is|lambda|True|False|None)\b", text):
        return None
    text = text.replace("&&", " and ").replace("||", " or ").replace("!=", " != ")
    text = re.sub(r"!(?!=)", f" {_NOT} ** ", text)
    ternary = _TERNARY.match(text.strip())
    try:
        if ternary:
            test = _evaluate_parsed(ternary.group("test"), name, seen)
            if test is None:
                return None
            return _evaluate_parsed(ternary.group("yes" if test else "no"), name, seen)
        return _evaluate_parsed(text, name, seen)
    except RecursionError:
        return None


def _evaluate_parsed(text: str, name: object, seen: set[str]) -> int | None:
    """`_evaluate` of a text already in Python's spelling."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return None
    try:
        result = _Evaluator(name, seen).visit(tree.body)
    except _Unsettled:
        return None
    return result


def _sizeof(match: re.Match[str]) -> str:
    size = SIZES.get(" ".join(match.group(1).split()))
    return f"({_UNSIGNED} ** {size})" if size is not None else "sizeof"


class _Unsettled(Exception):
    pass


class _Unsigned(int):
    """A value of an unsigned type."""


_OPERATORS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b, ast.BitOr: lambda a, b: a | b,
    ast.BitAnd: lambda a, b: a & b, ast.BitXor: lambda a, b: a ^ b,
}
_COMPARISONS = {
    ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
}


class _Evaluator(ast.NodeVisitor):
    """C's integer arithmetic on the parsed expression; any other node is unsettled."""

    def __init__(self, name: object, seen: set[str]) -> None:
        self.name, self.seen = name, seen

    def generic_visit(self, node: ast.AST) -> int:
        raise _Unsettled

    def visit_Constant(self, node: ast.Constant) -> int:
        if type(node.value) is not int:
            raise _Unsettled
        return node.value

    def visit(self, node: ast.AST) -> int:
        value = super().visit(node)
        if not -_LIMIT <= value < _LIMIT or (isinstance(value, _Unsigned) and value < 0):
            raise _Unsettled  # past `int`, or an unsigned value C wraps
        return value

    def visit_Name(self, node: ast.Name) -> int:
        lookup = self.name
        value = lookup(node.id, self.seen) if callable(lookup) and not node.id.startswith("_kgate_") else None
        if value is None:
            raise _Unsettled
        return int(value)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> int:
        value = self.visit(node.operand)
        if isinstance(node.op, ast.USub):
            return type(value)(-value)
        if isinstance(node.op, ast.UAdd):
            return value
        if isinstance(node.op, ast.Invert):
            return type(value)(~value)
        raise _Unsettled

    def visit_BinOp(self, node: ast.BinOp) -> int:
        if isinstance(node.op, ast.Pow):  # `!x` and a cast, written as a power of a marker (`_evaluate`)
            if not isinstance(node.left, ast.Name) or node.left.id not in (_NOT, _CASTED, _UNSIGNED):
                raise _Unsettled
            value = self.visit(node.right)
            return int(not value) if node.left.id == _NOT else \
                _Unsigned(value) if node.left.id == _UNSIGNED else int(value)
        left, right = self.visit(node.left), self.visit(node.right)
        unsigned = isinstance(left, _Unsigned) or (isinstance(right, _Unsigned) and not isinstance(
            node.op, (ast.LShift, ast.RShift)))
        result = self._arithmetic(node, left, right)
        return _Unsigned(result) if unsigned else result

    def _arithmetic(self, node: ast.BinOp, left: int, right: int) -> int:
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
            if right == 0:
                raise _Unsettled
            quotient = abs(left) // abs(right) * (1 if (left < 0) == (right < 0) else -1)  # C truncates
            return quotient if not isinstance(node.op, ast.Mod) else left - quotient * right
        operator = _OPERATORS.get(type(node.op))
        if operator is None or (isinstance(node.op, (ast.LShift, ast.RShift)) and not 0 <= right < 64):
            raise _Unsettled
        return int(operator(left, right))

    def visit_BoolOp(self, node: ast.BoolOp) -> int:
        values = [self.visit(v) for v in node.values]
        return int(all(values) if isinstance(node.op, ast.And) else any(values))

    def visit_Compare(self, node: ast.Compare) -> int:
        """C's comparisons: `a < b < c` is `(a < b) < c`."""
        left = self.visit(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            compare = _COMPARISONS.get(type(op))
            if compare is None:
                raise _Unsettled
            right = self.visit(right_node)
            if (isinstance(left, _Unsigned) or isinstance(right, _Unsigned)) and min(left, right) < 0:
                raise _Unsettled  # C compares a negative value with an unsigned one as a wrapped, unsigned value
            left = int(compare(left, right))
        return left
