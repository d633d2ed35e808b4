"""How a record names a file that a compile or an import read, alike on both sides of a diff.

`kgate diff` compiles the base revision in a temporary checkout of the repository, into the working tree's cache;
a record is used only while every file its compile or import read holds what it held then. A file of the project
is named relative to the project's folder, so each side reads its own. A file of the repository outside that
folder (a header in `../common`, a data file of a neighbouring folder) is named by its absolute path, and on the
base side that path is in the checkout: a record of either side would then name a file of one tree, and the other
side would check the record against that tree's file and be served a compile of the other revision's inputs.

So a record names a file of the base's checkout where the working tree has it (`named`), and each side reads such
a name in its own tree (`on_this_side`): the base the checkout's copy, the working tree its own file. A file
outside the repository is the same file on both sides, named as it is. The checkout is made afresh by every run: a
file of it is known by its content (`checked_out`), never by its times.
"""

from __future__ import annotations

import filecmp
import os

Checkout = tuple[str, str]  # (the working tree's repository, the base revision's checkout of it)
# Set by `kgate diff` for the length of the diff to a token of its own (and handed to compile workers): what no read
# of an import tells apart (a program whose own reads are not seen) is keyed by it, so that neither side of a diff is
# served a record made before it, by the other side or by a check.
DIFF_RUN = "KGATE_DIFF_RUN"


def named(path: str, checkout: Checkout | None) -> str:
    """An absolute path as a record names it: one in a base revision's checkout by the working tree's path."""
    if checkout is not None and _within(path, checkout[1]):
        return os.path.normpath(os.path.join(checkout[0], os.path.relpath(path, checkout[1])))
    return path


def on_this_side(name: str, checkout: Checkout | None) -> str:
    """The file an absolute name of a record stands for on this side: on a base revision's side, the checkout's copy
    of a file of the repository."""
    if checkout is not None and _within(name, checkout[0]) and not _within(name, checkout[1]):
        return os.path.normpath(os.path.join(checkout[1], os.path.relpath(name, checkout[0])))
    return name


def of_the_working_tree(path: str, checkout: Checkout | None) -> bool:
    """Whether a file a base revision's side read is the working tree's own (named by absolute path in a source or
    header: `#include "/work/repo/inc/h.cuh"`) where the checkout has its own copy, and that copy differs: what was
    built from it is not the base's. (A file the base revision does not hold, a header a build generated in an
    ignored folder, is the working tree's for both sides.)"""
    if checkout is None or not _within(path, checkout[0]) or _within(path, checkout[1]):
        return False
    copy = on_this_side(path, checkout)
    if not os.path.lexists(copy):
        return False
    try:  # the same bytes in both: reading either builds the same, so the base's own is what was read
        return not (os.path.isfile(path) and os.path.isfile(copy) and filecmp.cmp(path, copy, shallow=False))
    except OSError:
        return True


def checked_out(path: str, checkout: Checkout | None) -> bool:
    """Whether a file is in a base revision's checkout: made afresh by every run, so known by its content (its
    times and inode are the checkout's, not the revision's)."""
    return checkout is not None and _within(path, checkout[1])


def _within(path: str, folder: str) -> bool:
    inside = os.path.relpath(os.path.abspath(path), os.path.abspath(folder))
    return inside != os.pardir and not inside.startswith(os.pardir + os.sep)
