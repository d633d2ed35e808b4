"""The facts cache: content-addressed JSON records, written atomically.

Layout under the cache directory (default `.kgate-cache/` in the project):

    v1/expand/<key>.json       what importing a registered kernel told us
    v1/facts/<key>.json        KernelFacts of one variant and target
    v1/artifacts/<key>/        kernel.ptx, kernel.cubin, ptxas.log, kernel.sass

A record is written to a temporary name and moved into place with
os.replace, so a reader sees a whole file or none; a record that does not
parse is treated as missing and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kgate.atomicio import atomic_write

VERSION = "v1"


def digest(*parts: Any) -> str:
    """A stable hash of JSON-able parts."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class Cache:
    def __init__(self, directory: Path) -> None:
        self.directory = directory / VERSION

    def _path(self, kind: str, key: str) -> Path:
        return self.directory / kind / f"{key}.json"

    def artifacts(self, key: str) -> Path:
        return self.directory / "artifacts" / key

    def get(self, kind: str, key: str, check: Callable[[Any], object] | None = None) -> Any | None:
        """A record, or None: there is none, or it is not whole (JSON that does not parse) or, when `check`
        is given, not of its kind's shape (`kgate.compile.records`). None means: rebuild it."""
        try:
            with open(self._path(kind, key), "rb") as handle:
                value = json.loads(handle.read())
        except (OSError, ValueError):
            return None
        if check is not None:
            try:
                check(value)
            except (KeyError, TypeError, ValueError, AttributeError, IndexError):
                return None
        return value

    def put(self, kind: str, key: str, value: Any) -> None:
        path = self._path(kind, key)
        data = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
        try:
            atomic_write(path, data)
        except OSError:
            pass  # an unwritable cache costs speed, not correctness


def unusable(directory: Path) -> str | None:
    """Why the cache folder cannot be used (a file stands where a folder must be, no permission), or None.

    Compile workers write into it unchecked, so a broken cache would otherwise fail every kernel.
    """
    try:
        for folder in ("expand", "facts", "spans", "cuda", "artifacts", "lint"):
            (directory / VERSION / folder).mkdir(parents=True, exist_ok=True)
        (directory / "triton").mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory / VERSION):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


