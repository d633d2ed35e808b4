"""Helpers shared by the subcommands: configuration, selection, output."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kgate.core.config import Config, load_config
from kgate.core.errors import ConfigError
from kgate.core.findings import Severity
from kgate.core.result import Result
from kgate.core.selection import Selection, build_selection
from kgate.report.escape import terminal


def split_codes(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def config_from(args: argparse.Namespace) -> Config:
    path = getattr(args, "config", None)
    config = load_config(Path(path) if path else None)
    if getattr(args, "no_respect_gitignore", False):
        config = config.with_overrides(respect_gitignore=False)
    for notice in config.notices:  # configured paths that lead out of the project, said every time
        print(f"kgate: note: {terminal(notice, line_start=False)}", file=sys.stderr)
    return config


def selection_from(args: argparse.Namespace, config: Config) -> Selection:
    return build_selection(config, select=split_codes(getattr(args, "select", None)),
                           extend_select=split_codes(getattr(args, "extend_select", None)),
                           ignore=split_codes(getattr(args, "ignore", None)))


def fail_on(args: argparse.Namespace, config: Config) -> Severity:
    return Severity(getattr(args, "fail_on", None) or config.fail_on)


def emit(result: Result, args: argparse.Namespace, config: Config) -> int:
    """Render the result in the requested format, write it, and return the exit code."""
    from kgate.report import terminal
    from kgate.report.paths import from_here

    result = replace(result, exit_zero=bool(getattr(args, "exit_zero", False)))  # before rendering: the summary says so
    fmt = getattr(args, "format", "text")
    if fmt == "text":  # paths from where the command runs; the machine formats keep the project's names
        choice = getattr(args, "color", "auto")
        # A report written to a file takes colour only when asked for by name (FORCE_COLOR is for the screen).
        colour = choice == "always" if args.output else terminal.use_colour(choice, sys.stdout.isatty())
        quiet = getattr(args, "quiet", False)
        text = terminal.render(result, colour=colour, table=not quiet, quiet=quiet and result.command == "lint",
                               all_kernels=getattr(args, "show_kernels", False),
                               # shutil's import only where there is a table to fit (not for the commit hook)
                               width=None if args.output or quiet or not result.kernels else terminal.screen_width(),
                               shown=from_here(config.root))
    else:
        module = importlib.import_module(f"kgate.report.{fmt}_report")
        text = module.render(result, config)
    if getattr(args, "statistics", False):  # on stderr in every format: the report stays what it is
        for line in terminal.statistics_lines(result.findings):
            print(line, file=sys.stderr)
    output = getattr(args, "output", None)
    if output:
        from kgate.support.atomicio import atomic_write

        try:
            atomic_write(Path(output), text.encode(), follow=True)
        except OSError as exc:
            raise ConfigError(f"cannot write {output}: {exc.strerror}") from None
        # The report went to the file, in every format: the verdict still reaches the person or the log.
        print(terminal.summary_line(result), file=sys.stderr)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return result.exit_status()


# Seconds between two progress lines when stderr is not a terminal (a CI log); KGATE_PROGRESS_INTERVAL sets it.
PROGRESS_INTERVAL = 10.0


class ProgressBar:
    """Progress of the compiles on stderr. On a terminal: a one-line bar redrawn in place. Elsewhere (a CI log,
    a pipe): a plain line every PROGRESS_INTERVAL seconds while compiles run, the first only once they have run
    that long, so a short run prints none. `plain` False: no plain lines (the bar alone)."""

    def __init__(self, enabled: bool, *, plain: bool | None = None) -> None:
        tty = sys.stderr.isatty()
        self.enabled = enabled and tty
        self.plain = (enabled if plain is None else plain) and not tty
        self.drawn = False
        self.interval = _interval() if self.plain else PROGRESS_INTERVAL  # a bad setting fails before any compile
        self._ticker: _Ticker | None = None

    def __call__(self, done: int, total: int, label: str) -> None:
        if self.plain and total:
            if self._ticker is None:
                self._ticker = _Ticker(self.interval)
            self._ticker.update(done, total)
        if not self.enabled or total == 0:
            return
        width = 24
        filled = int(width * done / total)
        bar = "#" * filled + "." * (width - filled)
        text = f"\r[{bar}] {done}/{total} compiling {terminal(label)}"
        columns = 100
        try:
            import shutil

            columns = shutil.get_terminal_size().columns
        except OSError:
            pass
        sys.stderr.write(text[: columns - 1].ljust(min(columns - 1, 120)))
        sys.stderr.flush()
        self.drawn = True

    def clear(self) -> None:
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        if self.drawn:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _interval() -> float:
    text = os.environ.get("KGATE_PROGRESS_INTERVAL", "")
    try:
        value = float(text) if text else PROGRESS_INTERVAL
    except ValueError:
        raise ConfigError(f"KGATE_PROGRESS_INTERVAL: not a number of seconds: {text!r}") from None
    if not value > 0:
        raise ConfigError(f"KGATE_PROGRESS_INTERVAL: must be more than 0 seconds, not {text!r}")
    return value


class _Ticker:
    """A thread that writes "kgate: compiling: DONE/TOTAL done, Ns" every `interval` seconds while compiles run
    (a compile that takes minutes still shows the run is alive)."""

    def __init__(self, interval: float) -> None:
        import threading

        self.interval = interval
        self.start = time.monotonic()
        self.done = self.total = 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kgate-progress", daemon=True)
        self.thread.start()

    def update(self, done: int, total: int) -> None:
        with self.lock:
            self.done, self.total = done, total

    def _run(self) -> None:
        while not self.stopped.wait(self.interval):
            with self.lock:
                done, total = self.done, self.total
            if done < total:  # between two stages (Triton, then CUDA) or after the last: nothing is compiling
                sys.stderr.write(f"kgate: compiling: {done}/{total} done, {time.monotonic() - self.start:.0f}s\n")
                sys.stderr.flush()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()


def show_files(config: Config, selection: Selection, paths: list[str], *, force_exclude: bool = False,
               select_for: Callable[[Config], Selection] | None = None) -> int:
    """`--show-files`: the files the source rules would read, one a line, sorted as the run names them and
    shown from the current folder."""
    from kgate.pipeline.lint import discover
    from kgate.report.paths import from_here

    groups = discover(config, selection, paths, force_exclude=force_exclude, select_for=select_for)
    shown = from_here(config.root)
    for rel in sorted(rel for group in groups for rel in group.files):
        sys.stdout.write(terminal(shown(rel)) + "\n")
    return 0


def show_settings(config: Config, selection: Selection, path: str) -> int:
    """`--show-settings [FILE]`: the configuration as resolved (file, root, every setting, the rules that run
    with their severities and options) as JSON; for FILE, also which rules read it and which are ignored there."""
    import dataclasses
    import json

    from kgate import rules as registry  # type: ignore[attr-defined]

    settings = {f.name: _plain(getattr(config, f.name)) for f in dataclasses.fields(config)
                if f.name not in ("root", "source", "notices")}
    enabled = sorted(selection.enabled)
    out: dict[str, Any] = {
        "configuration": str(config.source) if config.source else None, "root": str(config.root),
        "settings": settings,
        "rules": {code: {"name": name, "severity": selection.severity.get(code, registry.load(code).severity).value,
                         "options": _plain(registry.options(code, selection.options))}
                  for code, name, _module in registry.REGISTRY if code in enabled},
    }
    if path:
        out["file"] = _file_settings(config, selection, path)
    sys.stdout.write(json.dumps(out, indent=2, sort_keys=True) + "\n")
    return 0


def _file_settings(config: Config, selection: Selection, path: str) -> dict[str, Any]:
    from kgate.collect.files import Exclusions
    from kgate.evaluate import source as engine
    if not Path(path).exists():
        raise ConfigError(f"{path}: no such file or directory")
    rel = Path(os.path.relpath(os.path.abspath(path), config.root)).as_posix()
    reading = [sr.rule.code for sr in engine.source_rules(selection) if sr.match(rel)]
    ignored = sorted(code for code in selection.enabled if selection.ignored_for(rel, code))
    return {"path": rel, "excluded": Exclusions(tuple(config.exclude) + tuple(config.extend_exclude))(rel),
            "source-rules": [code for code in reading if code not in ignored],
            "per-file-ignored": ignored}


def _plain(value: Any) -> Any:
    """A setting as JSON: tuples as lists, paths as text, entries as their tables."""
    import dataclasses

    if hasattr(value, "to_json"):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value
