"""Helpers shared by the subcommands: configuration, selection, output."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

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

    fmt = getattr(args, "format", "terminal")
    if fmt == "terminal":
        colour = args.output is None and sys.stdout.isatty()
        text = terminal.render(result, colour=colour, table=not getattr(args, "quiet", False))
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
    if getattr(args, "exit_zero", False):
        return 0
    return result.exit_code()


class ProgressBar:
    """A one-line progress bar on stderr, drawn only on a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.drawn = False

    def __call__(self, done: int, total: int, label: str) -> None:
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
        if self.drawn:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
