"""The makefiles a Makefile includes: `include`, `-include` and `sinclude` lines, followed to the files they name.

A build often keeps its nvcc flags or its architecture list in a makefile of their own (`include config/arch.mk`);
those settings are the including build's. A name is read as make reads it: relative to make's folder, the folder of
the Makefile it runs, also in a file that Makefile includes (`mk/arch.mk`'s `include mk/flags.mk` is the top's
`mk/flags.mk`, not `mk/mk/flags.mk`; a name make's folder does not hold is read beside the file that writes it,
as `make -I` would find it); the files it includes in turn are followed, each once. A name written with a
variable or a wildcard (`include $(ROOT)/arch.mk`, `include *.mk`) is not followed: what it names is make's to
decide. A plain `include` of a file that is not there is listed for a makefile make runs itself (make stops there;
the settings it would hold are unknown), not for a `.mk` file, whose names are read from the folder of whichever
Makefile includes it; `-include` and `sinclude` of one are not (make goes on without it).
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from kgate.support.atomicio import read_input_text

MAKE_NAMES = frozenset({"Makefile", "makefile", "GNUmakefile"})
# An include directive (not a recipe line: those start with a tab), its words up to a comment.
_INCLUDE = re.compile(r"^(?: *)(-include|sinclude|include)[ \t]+([^#\n]*)", re.MULTILINE)
_DEPTH = 8  # includes followed from one Makefile, one inside another


class Included(NamedTuple):
    path: str  # absolute
    rel: str  # relative to the project root, forward slashes; "" for a file outside the project
    text: str
    at: int  # the line of the including Makefile's own `include` that leads to it


class Missing(NamedTuple):
    line: int  # of the `include` in the file that names it
    name: str  # as written


def is_makefile(name: str) -> bool:
    return name in MAKE_NAMES or name.endswith(".mk")


def includes(path: str, rel: str, text: str) -> tuple[list[Included], list[Missing]]:
    """The makefiles `text` (the file at `path`, `rel` in the project) includes, directly or not, in the order make
    reads them, and the plain `include`s of its own that name no file."""
    root = path[:-len(rel)] if rel and path.replace(os.sep, "/").endswith(rel) else os.path.dirname(path)
    found: list[Included] = []
    missing: list[Missing] = []
    seen = {os.path.realpath(path)}
    _follow(path, text, root, seen, found, missing, 0, 0)
    if os.path.basename(path) not in MAKE_NAMES:
        missing = []  # a `.mk` file's names are read from the folder of the Makefile that includes it
    return found, missing


def _follow(path: str, text: str, root: str, seen: set[str], found: list[Included], missing: list[Missing],
            depth: int, at: int, folder: str = "") -> None:
    """Follow the includes of `text` (the file at `path`), each name read from `folder`: make's, the folder of the
    file the reading started at."""
    if "include" not in text or depth >= _DEPTH:
        return
    folder = folder or os.path.dirname(os.path.abspath(path))
    for match in _INCLUDE.finditer(text):
        optional = match.group(1) != "include"
        for name in match.group(2).split():
            if "$" in name or any(ch in name for ch in "*?["):
                continue  # make expands it: not followed
            target = os.path.normpath(os.path.join(folder, name))
            own = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), name))
            if depth and not os.path.isfile(target) and os.path.isfile(own):
                target = own  # not in make's folder but beside the file that names it: what it must mean (`make -I`)
            real = os.path.realpath(target)
            if real in seen:
                continue
            line = text.count("\n", 0, match.start()) + 1
            try:
                content = read_input_text(target)
            except (OSError, UnicodeDecodeError):
                if not optional and depth == 0:
                    missing.append(Missing(line, name))
                continue
            seen.add(real)
            inside = os.path.relpath(target, root).replace(os.sep, "/")
            found.append(Included(target, "" if inside.startswith("../") else inside, content, at or line))
            _follow(target, content, root, seen, found, missing, depth + 1, at or line, folder)
