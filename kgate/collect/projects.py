"""Which configuration governs a linted file: the nearest `kgate.toml`, or `pyproject.toml` with a `[tool.kgate]`
table, in the file's folder or above it, wherever kgate was started (as ruff resolves its own).

The closest configuration is used whole: settings are not merged across files, and the paths in it
(`per-file-ignores`, `exclude`) are relative to its folder. A file with no configuration above it gets the
run's (the one found from the working folder, or the defaults). With `--config` the named file governs
every file, as before. Command-line `--select`, `--ignore` and `--extend-select` apply under every one.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from kgate.core.config import Config, load_config
from kgate.core.discovery import configures_kgate
from kgate.core.errors import ConfigError
from kgate.support import reads

NAMES = ("kgate.toml", "pyproject.toml")  # in a folder with both, kgate.toml wins (as `find_config` has it)


class Projects:
    """The configurations of one lint run, found and loaded once each."""

    def __init__(self, run: Config, per_file: bool) -> None:
        self.run = run
        self.per_file = per_file
        self._own: dict[str, str | None] = {}  # folder -> its configuration file, or None
        self._loaded: dict[str, Config] = {}
        if run.source is not None:
            self._loaded[os.path.realpath(run.source)] = run

    def boundary(self, folder: str, names: Collection[str]) -> bool:
        """Whether a folder a walk meets holds a configuration of its own (another project's)."""
        return self.per_file and self.own_file(folder, names) is not None

    def governing(self, folder: str) -> Config:
        """The configuration of the nearest folder at or above `folder` that has one, else the run's."""
        if not self.per_file:
            return self.run
        probe = os.path.realpath(folder)
        while True:
            found = self.own_file(probe)
            if found is not None:
                return self.load(found)
            parent = os.path.dirname(probe)
            if parent == probe:
                return self.run
            probe = parent

    def own_file(self, folder: str, names: Collection[str] | None = None) -> str | None:
        """The configuration file in `folder` itself, or None; `names`: the folder's entries, when listed."""
        if folder in self._own:
            return self._own[folder]
        found = None
        for name in NAMES:
            if names is not None and name not in names:
                continue  # a listed folder: only what it holds is looked at
            path = os.path.join(folder, name)
            if names is None:
                reads.note(path)  # its absence too: one that appears later governs the folder
            if os.path.isfile(path) and (name == "kgate.toml" or configures_kgate(path)):
                found = path
                break
        self._own[folder] = found
        return found

    def load(self, path: str) -> Config:
        key = os.path.realpath(path)
        config = self._loaded.get(key)
        if config is None:
            try:
                config = load_config(Path(key))
            except ConfigError as exc:
                raise named(exc, os.path.basename(key), self.shown(Path(key))) from None
            self._loaded[key] = config
        return config

    def base(self, config: Config) -> str:
        """The folder of a configuration as the run names paths, with a trailing "/" ("" for the run's own)."""
        if config is self.run:
            return ""
        shown = self.shown(config.root)
        return "" if shown == "." else shown + "/"

    def shown(self, path: Path) -> str:
        """A path as the run names it: relative to the run's project folder, absolute outside it."""
        root = self.run.root.resolve()
        try:
            return path.resolve().relative_to(root).as_posix()
        except ValueError:
            return path.resolve().as_posix()


def named(exc: ConfigError, name: str, shown: str) -> ConfigError:
    """The error with the configuration file named as the run names it (`sub/kgate.toml`, not `kgate.toml`):
    a run reads several."""
    text = str(exc)
    if shown != name and text.startswith(name + ":"):
        return ConfigError(shown + text[len(name):])
    return exc


_NOT_PROJECTS = {"node_modules", "build", "dist", "site-packages", "__pycache__"}


def configurations_below(top: Path, limit: int = 3, depth: int = 4, folders: int = 2000) -> list[str]:
    """Up to `limit` configuration files in the folders below `top` (not in `top` itself), nearest first, as paths
    from `top`: the projects a monorepo's top holds, for a run there that found no configuration of its own. Hidden
    folders, build outputs and installed packages are not looked in, nor folders deeper than `depth`, nor more than
    `folders` folders (a home folder is not searched through)."""
    found: list[str] = []
    level = [str(top)]
    for _ in range(depth):
        below: list[str] = []
        for folder in level[:folders]:
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith(".") or entry.name in _NOT_PROJECTS or not entry.is_dir(follow_symlinks=False):
                    continue
                below.append(entry.path)
                names = [name for name in NAMES if os.path.isfile(os.path.join(entry.path, name))]
                own = next((os.path.join(entry.path, n) for n in names
                            if n == "kgate.toml" or configures_kgate(os.path.join(entry.path, n))), None)
                if own is not None:
                    found.append(Path(os.path.relpath(own, top)).as_posix())
                    if len(found) == limit:
                        return found
        level = below
    return found
