"""Triton's own cache inside kgate's, read only through kgate's cache reader.

`triton.compile` looks up its cache before compiling, even when told to
compile always (kgate keeps its figures in its own records and never uses
Triton's cached kernels): it opens the group file of the kernel's key and
checks that the files it names exist. A named pipe there would block that
open for ever and a link to /dev/zero would be read without end, so the
compile workers hand Triton this manager (`TRITON_CACHE_MANAGER`): the group
file is read through `kgate.support.atomicio.read_cached`, and only regular files
count as present. Whatever is not is a miss, and Triton compiles and writes
the files again (a folder in a file's place is removed first, as kgate's
own cache writer does).
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
