"""Where in the project an error was raised: the place a finding that a kernel did not compile points at when a
kernel module, or a project module it imports, raises while it is imported.

The project's files are `kgate.collect.membership`'s: under its root or a python-path folder, less installed
packages (a virtual environment inside the project included), the standard library and kgate's own modules:
the traceback's frames in them are the libraries' part of the story, and the last frame in the project is the
line its author can change. Runs in compile workers.
"""

from __future__ import annotations

import traceback

from kgate.collect.membership import in_project


def project_frame(exc: BaseException, roots: list[str]) -> tuple[str, int] | None:
    """(file, line) of the last frame of `exc`'s traceback in a file of the project under `roots`, or of the
    place a syntax error names there; None when none is the project's."""
    places = [(frame.filename, frame.lineno or 0) for frame in traceback.extract_tb(exc.__traceback__)]
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        places.append((exc.filename, exc.lineno))  # the file that did not parse has no frame of its own
    for filename, line in reversed(places):
        if line > 0 and in_project(filename, roots):
            return filename, line
    return None
