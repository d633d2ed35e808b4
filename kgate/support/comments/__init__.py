"""Where a file's comments are, for every kind of file kgate reads directives from or edits.

One reader per language, used by the suppression parser, by KG002's fix and by `--add-ignore`: a
`kgate: ignore` is a directive only inside a comment, and an edit that is meant to touch comments only
must leave the rest of the file (`code_only`) as it was.

- Python: the tokenizer (a file it cannot read: a scan that knows the string forms).
- C, C++, CUDA: `blank` (raw strings, character literals, continued `//` comments, backslash-newlines,
  header-names), which C++ rules read through `kgate.collect.cpp_text`.
- CMake: `#` and bracket comments `#[==[ ]==]`; quoted and bracket arguments are not comments.
- Shell: `#` at the start of a word, outside quotes, here-documents, parameter expansions and arithmetic.
- Makefiles: `#` not escaped, outside `define` blocks and variable references; a recipe line is read as shell.
- TOML: `#` outside the four kinds of string.
- INI (`setup.cfg`, `tox.ini`, `pytest.ini`): lines that start with `#` or `;` (inline text is a value).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from functools import cache
from typing import Any

from kgate.support.comments.python import PY_LINE, PY_NEWLINE
from kgate.support.comments.span import Comment

__all__ = ["CPP_SUFFIXES", "LINE_MARKER", "MARKERS", "PY_LINE", "PY_NEWLINE", "Blanked", "Comment", "blank",
           "code_only", "comments", "language", "same_code"]

_HASH_NAMES = {"CMakeLists.txt": "cmake", "Makefile": "make", "makefile": "make", "GNUmakefile": "make",
               "setup.cfg": "ini", "tox.ini": "ini", "pytest.ini": "ini"}
_SUFFIXES = {".py": "python", ".pyi": "python", ".cmake": "cmake", ".mk": "make", ".sh": "shell", ".bash": "shell",
             ".toml": "toml", ".ini": "ini", ".cfg": "ini", ".json": "json"}
CPP_SUFFIXES = (".cu", ".cuh", ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".inl", ".inc")
# The marker `--add-ignore` writes a line comment with, by language (INI and JSON take none at a line's end).
LINE_MARKER = {"python": "#", "cpp": "//", "cmake": "#", "shell": "#", "make": "#", "toml": "#"}
# The markers a line comment starts with, by language: a directive starts with one of its language's own.
MARKERS = {**{lang: (marker,) for lang, marker in LINE_MARKER.items()}, "ini": ("#", ";")}

# Language -> (module, function) of its reader: a module is imported when a file of its language is read (a lint of a
# Python file loads no C++ reader).
_READERS: dict[str, tuple[str, str]] = {
    "python": ("python", "comments"), "cpp": ("cpp", "comments"), "cmake": ("cmake", "comments"),
    "shell": ("shell", "shell_comments"), "make": ("shell", "make_comments"), "toml": ("config", "toml_comments"),
    "ini": ("config", "ini_comments")}


@cache
def _reader(lang: str) -> Callable[[str], list[Comment]] | None:
    found = _READERS.get(lang)
    if found is None:
        return None
    reader: Callable[[str], list[Comment]] = getattr(importlib.import_module(f"{__name__}.{found[0]}"), found[1])
    return reader


def __getattr__(name: str) -> Any:
    """`blank` and `Blanked`, C++'s reader, imported where first asked for."""
    if name in ("blank", "Blanked"):
        from kgate.support.comments import cpp

        return getattr(cpp, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def language(rel: str) -> str | None:
    """The language of a file by its name, or None where kgate knows no comments in it."""
    name = rel.rsplit("/", 1)[-1]
    if name in _HASH_NAMES:
        return _HASH_NAMES[name]
    if name.endswith(CPP_SUFFIXES):
        return "cpp"
    dot = name.rfind(".")
    return _SUFFIXES.get(name[dot:]) if dot > 0 else None


def comments(text: str, lang: str | None) -> list[Comment]:
    """The comments of `text` in order (none for a language kgate knows no comments of)."""
    reader = _reader(lang or "")
    return reader(text) if reader is not None else []


def code_only(text: str, lang: str | None) -> str:
    """`text` without its comments: each comment and the spacing before it go (a space stays where code
    follows on the line), a line that held only comments goes, no line keeps trailing spaces, and the file's
    final newline goes. Two texts with the same `code_only` differ in comments alone, in the spaces at the end of a
    line (which kgate's comment edits never change inside a string: an edit there also changes the string's other
    text), or in whether the file ends with a newline. In a Makefile's make text (not a recipe) the spacing before
    a comment and at a line's end is part of the line (`X := a  # note`: `X` ends in two spaces), and stays."""
    pieces: list[str] = []
    done = 0
    found = comments(text, lang)
    held: set[int] = set()  # the lines that hold part of a comment
    line, counted = 0, 0
    recipes = _make_recipe_lines(text) if lang == "make" else None
    for comment in found:
        line += text.count("\n", counted, comment.start)
        counted = comment.start
        start = comment.start
        while start > done and text[start - 1] in " \t":
            start -= 1
        if recipes is not None and line not in recipes and text[text.rfind("\n", 0, start) + 1:start].strip():
            start = comment.start  # make text: the spacing before the comment is part of the line's value
        pieces.append(text[done:start])
        newline = text.find("\n", comment.end)
        following = text[comment.end:len(text) if newline < 0 else newline]
        spanned = text.count("\n", comment.start, comment.end)
        pieces.append("\n" * spanned + (" " if following.strip() else ""))
        done = comment.end
        held.update(range(line, line + spanned + 1))
    pieces.append(text[done:])
    # Make text keeps the spaces that end a line: they end a variable's value (`X := a   `), comment or not.
    kept = "\n".join(line.rstrip("\r" if recipes is not None and number not in recipes else " \t\r")
                     for number, line in enumerate("".join(pieces).split("\n"))
                     if not (number in held and not line.strip(" \t\r")))
    # The newline that ends the file is no code: a comment removed from a last line without one leaves the line
    # before it ending the file with its newline, and the file reads as before.
    return kept.removesuffix("\n")


def _make_recipe_lines(text: str) -> set[int]:
    from kgate.support.comments.shell import make_recipe_lines

    return make_recipe_lines(text)


def same_code(rel: str, before: str, after: str) -> bool:
    """Whether `after` differs from `before` in comments only, as the language of `rel` reads them. Python and
    TOML must also mean the same to their own parsers (the same syntax tree, the same data)."""
    lang = language(rel)
    if lang == "json":
        return before == after
    if code_only(before, lang) != code_only(after, lang):
        return False
    if lang == "python":
        import ast

        try:
            return ast.dump(ast.parse(before)) == ast.dump(ast.parse(after))
        except (SyntaxError, ValueError):
            return False
    if lang == "toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib
        try:
            return bool(tomllib.loads(before) == tomllib.loads(after))
        except ValueError:
            return False
    return True
