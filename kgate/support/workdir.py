"""The folder kgate runs in. Every command and every API call reads it (the configuration is looked for from it,
relative paths are taken from it, the compile workers start in it), so one that no longer exists (deleted from
under a shell or a notebook) is said once, before anything runs, rather than met as a traceback deep inside."""

from __future__ import annotations

import os


def unusable() -> str | None:
    """Why the working folder cannot be used, or None when it can."""
    try:
        os.getcwd()
    except OSError as exc:
        return (f"the working folder cannot be read ({exc.strerror}; deleted while in use?): run kgate from a "
                f"folder that exists")
    return None
