"""The independent parts of a CUDA file: its kernels, grouped by the code of the file they share.

Two kernels are one part when a function or a macro of the file names both (a launcher or a dispatcher that
picks between them, a macro that launches them), or when each reaches a helper of the file that the other
reaches too (shared device functions, one templated launcher). A helper of a few lines that calls nothing of the
file (a load intrinsic, a type conversion, a `min`) joins nothing: sharing one is not sharing an operation's code. A macro joins only
where its text names a function of the file (a constant or an arithmetic macro is shared by everything).
Functions are found from the braces of blanked text (`kgate.collect.cpp_flow.head`), not by a parse.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from kgate.collect.cpp_flow import head
from kgate.collect.cpp_text import macros

SMALL_HELPER = 5  # lines of a helper's body, at most, for it to join nothing where it calls nothing of the file

_WORD = re.compile(r"[A-Za-z_]\w*")
_BRACES = re.compile(r"[{}]")


class Definition(NamedTuple):
    """A function or a macro of the file: where its text is, and whether it is a kernel."""

    name: str
    start: int
    end: int
    kernel: bool


def parts(code: str) -> list[list[str]]:
    """The kernels of blanked CUDA text, one sorted list per independent part, the parts in order of their first
    kernel's name."""
    functions = _functions(code)
    defined = {f.name for f in functions}
    joining = [f for f in functions if f.kernel or code.count("\n", f.start, f.end) > SMALL_HELPER
               or (defined - {f.name}) & set(_WORD.findall(code, f.start, f.end))]
    joining += [Definition(m.name, m.body, m.end, False) for m in macros(code)
                if defined & set(_WORD.findall(code, m.body, m.end))]
    group = _Groups({d.name for d in joining})
    for definition in joining:
        for used in set(_WORD.findall(code, definition.start, definition.end)) & group.names:
            group.join(definition.name, used)
    found: dict[str, set[str]] = {}
    for kernel in {f.name for f in functions if f.kernel}:
        found.setdefault(group.root(kernel), set()).add(kernel)
    return sorted(sorted(kernels) for kernels in found.values())


def _functions(code: str) -> list[Definition]:
    """The functions defined at namespace or class scope (not the lambdas and blocks inside a body), by their
    last name (`ns::f` is `f`; overloads and specialisations are one name)."""
    out: list[Definition] = []
    stack: list[tuple[int, tuple[int, str] | None]] = []  # open braces: offset, and its function's head
    for match in _BRACES.finditer(code):
        if match.group() == "{":
            function = None
            if not any(opened is not None for _, opened in stack):
                kind, at, name = head(code, match.start())
                function = (at, name.split("::")[-1]) if kind == "function" else None
            stack.append((match.start(), function))
        elif stack:
            start, function = stack.pop()
            if function is not None:
                at, name = function
                declared = max(code.rfind(";", 0, at), code.rfind("}", 0, at), code.rfind("{", 0, at)) + 1
                out.append(Definition(name, start, match.end(), "__global__" in code[declared:at]))
    return out


class _Groups:
    """Union-find over names."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self._parent = {name: name for name in names}

    def root(self, name: str) -> str:
        while self._parent[name] != name:
            self._parent[name] = self._parent[self._parent[name]]
            name = self._parent[name]
        return name

    def join(self, a: str, b: str) -> None:
        self._parent[self.root(a)] = self.root(b)
