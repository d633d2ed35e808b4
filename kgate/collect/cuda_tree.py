"""The project's C++ and CUDA files together, as one input of a verdict (`kgate.collect.depends`): which there are and
the state of each. Apart from `kgate.collect.cuda_project`, which reads them: a warm lint checks that none of them
changed without loading what reads them."""

from __future__ import annotations

import os

from kgate.collect import depends
from kgate.collect.files import tree_listing
from kgate.support.filestat import current

# What starts a `<<<...>>>` launch in C++ text, its chevrons spaced or not (`k << <g, b>> > (x)` and `k<<\t<...`
# compile): a file without any of them launches nothing this way. Here, beside the files' names, so that the launch
# rule's pre-filter reads it without loading the C++ text readers.
LAUNCH_MARKS = ("<<<", "<< ", "<<\t")

# The names of C++ and CUDA files, sources and headers: the one list of what the CUDA source rules read and what
# the project's reading of its other files takes in (a launch or a check macro in a `.hh` or `.inl` is one).
SOURCES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp", ".hh", ".hxx", ".inl")
HEADERS = (".cuh", ".h", ".hpp", ".hh", ".hxx", ".inl")


def sources(root: str) -> list[tuple[str, str]]:
    """(project-relative name, path) of the project's C++ and CUDA files, in a stable order."""
    found: list[tuple[str, str]] = []
    for here, names in tree_listing(root):
        for name in names:
            if name.endswith(SOURCES):
                path = os.path.join(here, name)
                found.append((os.path.relpath(path, root).replace(os.sep, "/"), path))
    return found


def tree_state(root: str, files: list[tuple[str, str]] | None = None) -> list[int] | None:
    """The state of the project's C++ and CUDA files together: which there are and the state of each, as the run took
    it (None where one was written too recently to vouch for it)."""
    summary = depends.blake2b(digest_size=8)
    for rel, path in sources(root) if files is None else files:
        state = current(path)
        if depends.stable(state) is None and state is not None:
            return None
        summary.update(f"{rel}\0{state}\n".encode("utf-8", "surrogateescape"))
    return [int.from_bytes(summary.digest(), "big")]
