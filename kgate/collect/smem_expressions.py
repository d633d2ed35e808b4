"""A launch's dynamic shared memory that the file does not settle to a number but the compiler can: `sizeof` of a
type (`sizeof(typename Kernel::SharedStorage)`), a type's constant (`GemmKernel::SharedStorageSize`), arithmetic
over them, as CUTLASS's adapter and code written like it size `extern __shared__` storage.

Two halves. Where a site is read (`CompilerSizes.of`): the size's text, each local of the function around the site
replaced by its value's text (`kgate.collect.cpp_constants.Constants.expanded`), the namespaces the site lies in,
and the names in it that only the site's own scope knows (a template's parameters, a class's members, a function's
parameters and locals: `hidden`). Where a compiled kernel is known (`instance_size`): the size as one instantiation
gives it, each name the site writes as the kernel's template argument (`device_kernel<Op>`) replaced by the
instantiation's argument (`device_kernel<user::Copy>`: `Op` is `user::Copy`), with the kernel spelled the same way.
The compiler then evaluates it in those namespaces (`kgate.compile.cuda_probe`), and checks that the kernel spelled
is the compiled one. A size with a hidden name the kernel's arguments do not give is none: its name would mean
another thing away from the site.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from kgate.collect.cpp_constants import Constants
from kgate.collect.cpp_statements import NAMESPACE_HEAD, head
from kgate.collect.cpp_text import balanced, macros, split_arguments
from kgate.collect.cuda_names import ANONYMOUS, short_name


@dataclass(frozen=True)
class CompilerSize:
    """A size for the compiler: `expression` evaluated in `namespace` (its names from the outermost; "" for an
    anonymous one), where `hidden` are the names it uses that the site's scope may declare, and `declared` the names
    the site's scope does declare (its templates' parameters, its class's members, its function's locals): the
    names of a kernel's template arguments that may stand for another type in each instantiation."""

    expression: str
    namespace: tuple[str, ...]
    hidden: tuple[str, ...]
    declared: frozenset[str] = frozenset()


_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*")
# C++'s words a size may hold that name nothing of the program.
_WORDS = frozenset({
    "sizeof", "alignof", "__alignof__", "typename", "template", "const", "volatile", "unsigned", "signed", "int", "long",
    "short", "char", "bool", "float", "double", "void", "true", "false", "nullptr", "static_cast", "decltype", "auto",
    "struct", "class", "union", "enum",
})
# A name a declaration introduces: after a type (a word that is not one of these, or `>`, `*`, `&`, `...`) and
# before what follows a declared name (`=`, `;`, `{`, `(`, `[`, `,`, `)`, `>`, a single `:`). Over-reads (a
# function's name, a bit-field's), which only makes a size more often left to the run.
_NOT_TYPES = ("return|sizeof|alignof|case|new|delete|throw|else|do|goto|typename|template|operator|decltype|namespace|"
              "co_return|co_yield|static_assert|and|or|not|if|while|switch")
_DECLARES = re.compile(r"(?:(?<![\w.])(?!(?:" + _NOT_TYPES + r")\b)[A-Za-z_]\w*\b|[>*&.])\s*(?P<name>[A-Za-z_]\w*)\b\s*"
                       r"(?=[=;{(\[,)>]|:(?!:))")
# A class with a base (whose members the text does not show): `struct K : Base<T> {`.
_BASES = re.compile(r"\b(?:struct|class|union)\b(?:[^:;{}]|::)*:(?!:)")
_CLASS = re.compile(r"\b(?:struct|class|union)\b[^;{}()]*$")
_NAMESPACE_NAME = re.compile(r"namespace\s*([\w:]*)\s*$")
# What a demangled template argument shows that no source can write: a lambda's or an unnamed type's name, an ABI
# tag, a digest standing for arguments too long to demangle (`kgate.collect.cuda_names.short_name`).
_UNSPELLABLE = re.compile(r"[{}'$#\[]|\(anonymous namespace\)")


class CompilerSizes:
    """The sizes of one file's sites as the compiler may evaluate them away from the site (`of`). Asked in the
    order of the sites (each kind of site in turn), the file's braces are scanned once per kind: a generated file
    of thousands of launches is not scanned again for each."""

    def __init__(self, code: str, constants: Constants) -> None:
        self.code = code  # blanked, without the lines under `#if 0`
        self.constants = constants
        self.opens: list[int] = []  # the braces open at `scanned`
        self.scanned = 0
        self.heads: dict[int, tuple[str, str | None, bool]] = {}  # brace -> what it opens (`_head`)
        self.declared: dict[int, frozenset[str]] = {}  # declaration's start -> the names it declares
        self._macros: list[tuple[int, int]] | None = None  # the spans of the file's `#define`s, in order

    def of(self, expression: str, at: int) -> CompilerSize | None:
        """`expression` at offset `at` as the compiler may evaluate it; None where no name in it is for the compiler
        (plain arithmetic the file would have settled) or a local's value is not one text (`Constants.expanded`)."""
        text = self.constants.expanded(expression, at)
        if text is None or "kgate_" in text or _NOT_AN_EXPRESSION.search(text):
            return None
        names = sorted({m.group(0) for m in _NAME.finditer(text) if m.group(0) not in _WORDS and not _qualified(
            text, m.start())})
        if not names:
            return None
        namespace, start, opaque = self._scope(at)
        declared = self._declared(start) if start is not None else frozenset()
        hidden = names if opaque or self._in_macro(at) else [name for name in names if name in declared]
        return CompilerSize(text, namespace, tuple(hidden), declared)

    def _scope(self, at: int) -> tuple[tuple[str, ...], int | None, bool]:
        """The namespaces around `at`, the opening brace of the outermost declaration around it that is not a
        namespace (a class, or a function; None at namespace scope), and whether a name of its scope may be one the
        text does not show (a class with a base; a member function defined outside its class)."""
        if at < self.scanned:
            self.opens, self.scanned = [], 0
        for match in _BRACES.finditer(self.code, self.scanned, at):
            if match.group() == "{":
                self.opens.append(match.start())
            elif self.opens:
                self.opens.pop()
        self.scanned = at
        namespace: list[str] = []
        outermost: int | None = None
        opaque = False
        for opening in self.opens:
            kind, name, hides = self._head(opening)
            if kind == "namespace" and outermost is None:
                namespace += name.split("::") if name else [""]
            elif kind != "extern":
                outermost = opening if outermost is None else outermost
                opaque = opaque or hides
        return tuple(namespace), outermost, opaque

    def _head(self, opening: int) -> tuple[str, str | None, bool]:
        """What the brace at `opening` opens ("namespace" with its name, "extern", "class", anything else) and
        whether names of its scope may be out of sight (a base class's, a class's whose member function this is)."""
        if opening not in self.heads:
            code = self.code
            before = code[max(0, opening - 200):opening]
            start = max(code.rfind(mark, 0, opening) for mark in ";{}") + 1
            if NAMESPACE_HEAD.search(before):
                named = _NAMESPACE_NAME.search(before)
                found: tuple[str, str | None, bool] = ("namespace", named.group(1), False) if named is not None \
                    else ("extern", None, False)
            elif _CLASS.search(code, start, opening):
                found = ("class", None, _BASES.search(code, start, opening) is not None)
            else:
                kind, name_at, _name = head(code, opening)
                found = (kind, None, kind == "function" and code[:name_at].rstrip().endswith("::"))
            self.heads[opening] = found
        return self.heads[opening]

    def _declared(self, opening: int) -> frozenset[str]:
        """The names the declaration whose body opens at `opening` declares, its template's head included."""
        if opening not in self.declared:
            code = self.code
            start = max(code.rfind(mark, 0, opening) for mark in ";{}") + 1
            text = code[start:balanced(code, opening, "{", "}")]
            self.declared[opening] = frozenset(m.group("name") for m in _DECLARES.finditer(text)) - _WORDS
        return self.declared[opening]

    def _in_macro(self, at: int) -> bool:
        """Whether `at` lies in a `#define`: its names are those of the macro's uses, wherever they are."""
        if self._macros is None:
            self._macros = [(macro.start, macro.end) for macro in macros(self.code)]
        index = bisect.bisect_right(self._macros, (at, len(self.code))) - 1
        return index >= 0 and self._macros[index][0] <= at < self._macros[index][1]


_BRACES = re.compile(r"[{}]")
# What a size for the compiler may not hold: a statement's or a block's marks, a string, an object's `this`.
_NOT_AN_EXPRESSION = re.compile(r"[;{}\"']|\bthis\b")


def _qualified(text: str, at: int) -> bool:
    return text[:at].rstrip().endswith(("::", ".", "->"))


def given_by(size: CompilerSize, template: str | None) -> bool:
    """Whether a kernel's instantiations may give every hidden name of a size: each is one of the template
    arguments the site writes (`template`, without spaces)."""
    written = set(split_arguments(template[1:-1])) if template else set()
    return all(name in written for name in size.hidden)


@dataclass(frozen=True)
class InstanceSize:
    """What the compiler is asked for one compiled kernel: `expression` evaluated in `namespace`, where `kernel`
    spells the kernel launched (`&kernel` must be the compiled `symbol`)."""

    namespace: tuple[str, ...]
    expression: str
    kernel: str
    symbol: str


def instance_size(size: CompilerSize, kernel: str, scope: str | None, template: str | None,
                  symbol: str) -> InstanceSize | None:
    """The size a site gives the kernel compiled as `symbol` (its PTX entry): the site names it as `scope::kernel`
    with the template arguments `template` (as written, without spaces; None: none written). Each argument the
    site writes as a name its scope declares (a template's parameter, a class's alias) stands for the
    instantiation's argument in its place, in the size and in the kernel's spelling. None where the
    instantiation's arguments cannot be written as C++ (a lambda's type, a name the demangler does not take) or
    a hidden name of the size is none of those."""
    arguments = _instance_arguments(symbol)
    if arguments is None:
        return None
    written = split_arguments(template[1:-1]) if template else []  # none written: the compiled ones are spelled
    if len(written) > len(arguments):
        return None
    # Only a name the site's scope declares stands for the instantiation's argument; any other (`float`, a type of
    # the namespace's) is the kernel's own, and the compiler checks that the kernel so spelled is the compiled one.
    given = {name: value for name, value in zip(written, arguments) if name in size.declared}
    if any(name not in given for name in size.hidden):
        return None
    expression = _replaced(size.expression, given)
    shown = [_replaced(arg, given) for arg in written] if written else arguments
    spelled = f"{scope}::{kernel}" if scope else kernel
    if shown:
        spelled += "< " + " , ".join(shown) + " >"
    return InstanceSize(size.namespace, expression, spelled, symbol)


def _instance_arguments(symbol: str) -> list[str] | None:
    """The template arguments of the kernel compiled as `symbol`, as C++ may write them in its file ([] for a
    kernel that is no template); None where the demangled name cannot be written so."""
    name = short_name(symbol)
    head_end = name.find("<")
    if head_end < 0:
        return [] if symbol != name or not symbol.startswith("_Z") else None
    if not name.endswith(">"):
        return None
    arguments = name[head_end + 1:-1].replace(ANONYMOUS, "")  # the file's own anonymous namespace: seen unnamed
    if _UNSPELLABLE.search(arguments):
        return None
    return split_arguments(arguments)


def _replaced(text: str, given: dict[str, str]) -> str:
    """`text` with each unqualified name of `given` replaced by its value (spaced, so that `a-N` stays a
    subtraction when `N` is `-1`)."""
    return _NAME.sub(lambda m: f" {given[m.group(0)]} " if m.group(0) in given and not _qualified(
        text, m.start()) else m.group(0), text)
