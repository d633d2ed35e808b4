"""Regular expressions compiled on their first use, and the reading of a configured path pattern (`from_root`,
`path_glob`).

A module-level `re.compile` costs its compile whenever the module is imported, used or not: a lint of one
Python file imports every selected rule's module (their codes, options and file globs key the lint cache), and
most of their expressions are never matched. `lazy` defers the compile to the first call of a method.
"""

from __future__ import annotations

import fnmatch
import re
from itertools import product
from typing import Any, cast

# What a use reads of a compiled expression: bound onto the stand-in on first use, so later calls cost what a
# compiled expression's do.
_BOUND = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner", "pattern",
          "flags", "groups", "groupindex")


class _Lazy:
    def __init__(self, pattern: str | bytes, flags: int) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        pattern, flags = self._source
        compiled: re.Pattern[Any] = re.compile(pattern, flags)
        for attr in _BOUND:
            setattr(self, attr, getattr(compiled, attr))
        return getattr(compiled, name)


def lazy(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """`re.compile(pattern, flags)`, compiled when a method is first called (not for `re.sub(x, ...)` and the like,
    which need the compiled object itself)."""
    return cast("re.Pattern[str]", _Lazy(pattern, flags))


def lazy_bytes(pattern: bytes, flags: int = 0) -> re.Pattern[bytes]:
    """`lazy` for a bytes pattern."""
    return cast("re.Pattern[bytes]", _Lazy(pattern, flags))


def from_root(pattern: str) -> tuple[str, bool]:
    """A configured path pattern without its leading `./` (`./tests` is `tests` of the configuration's folder),
    and whether it had one: then it names that path from the folder, never a name at any depth."""
    anchored = False
    while pattern.startswith("./"):
        pattern, anchored = pattern[2:].lstrip("/"), True
    return pattern, anchored


def path_glob(pattern: str) -> str:
    """The regular expression of a path glob as `fnmatch` reads it, where a `**/` also stands for no folder at all
    (`**/gen/*.cu` matches `gen/k.cu`, `src/**/k.cu` matches `src/k.cu`), as git, ruff and `Path.glob` read it."""
    pieces = pattern.split("**/")
    if len(pieces) == 1:
        return fnmatch.translate(pattern)
    if len(pieces) > 5:  # each `**/` doubles the forms: past four, `*` (which crosses folders here) stands for it
        return fnmatch.translate(pattern.replace("**/", "*"))
    forms = {pieces[0] + "".join(("**/" if keep else "") + piece for keep, piece in zip(kept, pieces[1:]))
             for kept in product((True, False), repeat=len(pieces) - 1)}
    return "|".join(f"(?:{fnmatch.translate(form)})" for form in sorted(forms))
