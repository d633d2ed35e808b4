"""The environment as an import reads it: `os.environ` (and `os.environb`) made, for the length of a recorded
import, a mapping that notes each variable the project looks up (the whole environment where it is iterated) and
each it sets (`kgate.compile.import_recorder`), and so is the mapping they both keep the variables in
(`os.environ._data`, which is `posix.environ`), read past them; and the environment as it is, read without being
noted.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kgate.compile.import_recorder import Recorder

_RECORDER_OF: list[Callable[[], Recorder | None]] = []


def watch_with(recorder_of: Callable[[], Recorder | None]) -> None:
    """How the process's recorder is found (given once, by the recorder's module)."""
    _RECORDER_OF[:] = [recorder_of]


def _recorder() -> Recorder | None:
    return _RECORDER_OF[0]() if _RECORDER_OF else None


def watch(environ: Any) -> None:
    """Note what the project reads of `environ` from now on."""
    if type(environ) is os._Environ:
        _set_class(environ, _ReadEnviron)


def unwatch(environ: Any) -> None:
    if type(environ) is _ReadEnviron:
        _set_class(environ, os._Environ)


_SAVED_DATA: list[dict[Any, Any]] = []


def watch_data() -> None:
    """Note what the project reads of the environment's own mapping, past os.environ, from now on: a mapping that
    notes its reads stands in for it wherever it is reached (os.environ, os.environb, posix.environ)."""
    data = os.environ._data  # type: ignore[attr-defined]
    if type(data) is not dict or _SAVED_DATA:
        return
    _SAVED_DATA.append(data)
    _put_data(_ReadData(data))


def watch_user_base(rec: Recorder) -> None:
    """Note the user's base folder where the project asks for it (`site.getuserbase()`, and
    `site.getusersitepackages()` under it): the interpreter found it from PYTHONUSERBASE or HOME as it started,
    where no look-up of the environment was noted."""
    import site

    from kgate.compile.import_reads import USER_BASE

    def noting(real: Callable[[], Any]) -> Callable[[], Any]:
        def call() -> Any:
            if not rec.busy and rec.where is not None and not rec.by_toolchain():
                rec.add(f"{USER_BASE}:", _SAVED_SITE[0]())  # what `import_reads.value` gives in the main process
            return real()
        return call

    if not _SAVED_SITE:
        _SAVED_SITE.extend([site.getuserbase, site.getusersitepackages])
        site.getuserbase, site.getusersitepackages = noting(site.getuserbase), noting(site.getusersitepackages)


def unwatch_user_base() -> None:
    if _SAVED_SITE:
        import site

        site.getuserbase, site.getusersitepackages = _SAVED_SITE
        _SAVED_SITE.clear()


_SAVED_SITE: list[Callable[[], Any]] = []


def unwatch_data() -> None:
    """The environment's own mapping back in its place, holding what the import set meanwhile."""
    if not _SAVED_DATA:
        return
    data, now = _SAVED_DATA.pop(), raw()
    data.clear()
    data.update(now)
    _put_data(data)


def _put_data(data: dict[Any, Any]) -> None:
    for environ in (os.environ, getattr(os, "environb", None)):
        if environ is not None:
            environ._data = data  # type: ignore[union-attr]
    posix = sys.modules.get(os.name)  # `posix`, whose `environ` os.environ was made from and keeps
    if posix is not None and isinstance(getattr(posix, "environ", None), dict):
        posix.environ = data  # type: ignore[attr-defined]


def raw() -> dict[Any, Any]:
    """The environment's own mapping (bytes names and values on POSIX), read without being noted."""
    # The dict's own items, not the noting mapping's methods (a copy of a dict subclass calls its keys() and
    # __getitem__)
    return dict(dict.items(os.environ._data))  # type: ignore[attr-defined]


class RealEnv(Mapping[str, str]):
    """The environment as it is, read without being recorded (the recorder's own view of it)."""

    def __getitem__(self, name: str) -> str:
        return _env_data()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(_env_data())

    def __len__(self) -> int:
        return len(_env_data())


def _env_data() -> dict[str, str]:
    return {os.fsdecode(k): os.fsdecode(v) for k, v in raw().items()}


class _ReadEnviron(os._Environ[Any]):
    """os.environ (and os.environb) that records what the project looks up in it."""

    def __getitem__(self, name: Any) -> Any:
        _note_env(name)
        return super().__getitem__(name)

    def __setitem__(self, name: Any, item: Any) -> None:
        rec = _recorder()
        if rec is not None and isinstance(name, (str, bytes)):
            rec.written.add(os.fsdecode(name))
        super().__setitem__(name, item)

    def __iter__(self) -> Iterator[Any]:
        _note_env("*")
        return super().__iter__()

    def __len__(self) -> int:
        _note_env("*")
        return super().__len__()


class _ReadData(dict[Any, Any]):
    """The environment's own mapping, noting what is read of it: a variable looked up by name, the whole
    environment where it is iterated, counted or copied."""

    def __getitem__(self, name: Any) -> Any:
        _note_env(name)
        return super().__getitem__(name)

    def get(self, name: Any, default: Any = None) -> Any:
        _note_env(name)
        return super().get(name, default)

    def __contains__(self, name: object) -> bool:
        _note_env(name)
        return super().__contains__(name)

    def __iter__(self) -> Iterator[Any]:
        _note_env("*")
        return super().__iter__()

    def __len__(self) -> int:
        _note_env("*")
        return super().__len__()

    def keys(self) -> Any:
        _note_env("*")
        return super().keys()

    def items(self) -> Any:
        _note_env("*")
        return super().items()

    def values(self) -> Any:
        _note_env("*")
        return super().values()

    def copy(self) -> dict[Any, Any]:
        _note_env("*")
        return dict(dict.items(self))


def _set_class(environ: os._Environ[Any], cls: type[os._Environ[Any]]) -> None:
    """Make `environ` one of `cls` in place: every module's reference to os.environ sees the change."""
    environ.__class__ = cls


def _note_env(name: Any) -> None:
    rec = _recorder()
    if rec is not None and not rec.busy and isinstance(name, (str, bytes)):
        rec.busy = True
        try:
            rec.note_env(os.fsdecode(name))
        finally:
            rec.busy = False
