"""A flag each thread holds for itself: the guard an audit hook sets while it records, so that what the hook itself
does is not recorded as a read.

An audit hook runs in whichever thread raised the event. A guard shared by every thread would make an event of one
thread, raised while another thread is inside the hook (kgate's watcher of its own process polling /proc, a module's
helper thread), look like the hook's own, and the read would be dropped: a record keyed without an input it was made
from. So the guard is kept per thread (`PerThreadFlag`): a thread's own hook still stays out of its own way, and no
thread stays out of another's. By thread identity (`_thread`, loaded with the interpreter), not `threading.local`:
the commit hook's lint, which records its reads, does not import `threading` for it.
"""

from __future__ import annotations

import _thread
from typing import Any


class PerThreadFlag:
    """A boolean attribute whose value is each thread's own: False in a thread that never set it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}_threads"  # the identities of the threads that hold it set

    def __get__(self, obj: Any, owner: type | None = None) -> bool:
        if obj is None:
            return self  # type: ignore[return-value]
        return _thread.get_ident() in obj.__dict__.get(self.slot, ())

    def __set__(self, obj: Any, value: bool) -> None:
        threads: set[int] = obj.__dict__.setdefault(self.slot, set())
        if value:
            threads.add(_thread.get_ident())
        else:
            threads.discard(_thread.get_ident())
