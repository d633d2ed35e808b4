"""SHA-256 from Python's builtin module: `hashlib` loads OpenSSL, a measurable part of a replay and of a commit
hook's lint, which hash a few small records only."""

from __future__ import annotations

try:
    from _sha2 import sha256  # type: ignore[import-not-found, unused-ignore]  # Python 3.12 on
except ImportError:
    try:
        from _sha256 import sha256  # type: ignore[import-not-found, no-redef, unused-ignore]
    except ImportError:  # pragma: no cover - a Python built without it
        from hashlib import sha256  # type: ignore[assignment, no-redef, unused-ignore]

__all__ = ["sha256"]
