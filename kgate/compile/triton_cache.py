"""Triton's own cache inside kgate's: a folder of its own for each compile, removed when the compile is done.

`triton.compile` writes every stage's output into its cache and reads the
kernel back from there, even when told to compile always. kgate keeps what it
needs (cubin, PTX, TTGIR, the ptxas log) in its own records and never reuses
Triton's, so each compile gets an empty folder under `triton/` in kgate's
cache (`kgate.compile.cache.triton_folder`), named after the worker's process, and the folder
goes when the compile ends. Nothing of Triton's is left to grow the cache a CI
job carries between runs, and nothing another run left (or planted) there is
ever read. What a killed worker leaves is removed by a later run
(`kgate.compile.cache.sweep_triton`).

Triton still looks its cache up before compiling. The compile workers hand it
this manager (`TRITON_CACHE_MANAGER`) all the same: the group file is read
through `kgate.support.atomicio.read_cached`, and only regular files count as
present, so not even a folder of a compile in progress could make an open
block or read without end.
"""

from __future__ import annotations

import json
import os
import stat

from triton.runtime.cache import FileCacheManager

from kgate.support.atomicio import CACHE_LIMIT, clear_folder, read_cached


class GuardedCache(FileCacheManager):
    def has_file(self, filename: str) -> bool:
        try:
            st = os.lstat(self._make_path(filename))
        except (OSError, ValueError):
            return False
        return stat.S_ISREG(st.st_mode) and st.st_size <= CACHE_LIMIT

    def get_group(self, filename: str) -> dict[str, str] | None:
        data = read_cached(self._make_path(f"__grp__{filename}"))
        if data is None:
            return None
        try:
            children = json.loads(data)["child_paths"]
            group = {str(name): str(path) for name, path in children.items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            return None  # damaged: a miss, as Triton treats it
        for path in group.values():
            if os.path.dirname(path) != self.cache_dir or not self.has_file(os.path.basename(path)):
                return None
        return group

    def put(self, data: bytes | str, filename: str, binary: bool = True) -> str:
        clear_folder(self._make_path(filename))
        return super().put(data, filename, binary)
