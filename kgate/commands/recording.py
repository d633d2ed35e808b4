"""Run records for `kgate check` and `kgate lint`: what a full run saw and printed (see `kgate.pipeline.fastpath`).

The project's inputs are snapshotted before the run, and everything else the
run reads is recorded as it reads it (`kgate.support.reads`); the output is captured
while it is written; the record is left with those states, unless the outcome
depended on the run's circumstances.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO
from pathlib import Path
from typing import TextIO

from kgate.core.config import Config
from kgate.pipeline import fastpath
from kgate.support import reads


def snapshot(args: argparse.Namespace, config: Config, extra: list[str], *, compilers: bool) -> fastpath.Snapshot | None:
    """The inputs of this run: the project's files and folders, the configuration, the baseline,
    kgate's own files and (for a run that compiles) the compilers'."""
    if args.no_cache or getattr(args, "verbose", False) or getattr(args, "argv", None) is None:
        return None
    found = fastpath.config_of(args.argv)
    if found is None:
        return None
    skip = [str(config.root / config.cache_dir), str(config.root / ".git")]
    if getattr(args, "output", None):
        skip.append(os.path.abspath(args.output))
    files = [found, *fastpath.candidates(os.getcwd(), found)] + ([str(config.source)] if config.source else [])
    files.append(str(config.root / config.baseline))
    files.extend(extra)
    if config.respect_gitignore:  # inside .git (not walked) or outside the project: watched by name
        from kgate.collect.ignores import repository_files

        files.extend(repository_files(str(config.root)))
    files.extend(fastpath.kgate_files())
    if compilers:
        files.extend(fastpath.compiler_files())
    taken = fastpath.Snapshot.take(str(config.root), tuple(config.exclude) + tuple(config.extend_exclude),
                                   tuple(skip), files, fastpath.stated(args.argv))
    reads.start(skip, taken.dirs)
    return taken


def finish(args: argparse.Namespace, taken: fastpath.Snapshot | None, out: StringIO, err: StringIO,
           code: int, *, replayable: bool = True) -> None:
    """Leave the run record, with the report written to -o if there is one.

    `replayable` False (a compile timed out, a worker died): no record, the next run is a full one.
    """
    log = reads.stop()
    if taken is None or not replayable or log is None or log.broken:
        return
    taken.add(log.files, log.dirs, log.env)
    outputs = {}
    if getattr(args, "output", None):
        try:
            if not stat.S_ISREG(os.lstat(args.output).st_mode):
                # `-o /dev/stdout`, a named pipe, a symlink: reading it back would block or read something else,
                # and a replay replaces the file it writes. Such a run is not recorded.
                return
            outputs[os.path.abspath(args.output)] = Path(args.output).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return
    fastpath.record(args.argv, taken, out.getvalue(), err.getvalue(), code, outputs)


class _Tee:
    """Writes to the real stream and keeps a copy."""

    def __init__(self, stream: TextIO, copy: StringIO) -> None:
        self.stream = stream
        self.copy = copy

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def __getattr__(self, name: str) -> object:
        return getattr(self.stream, name)


@contextmanager
def capture() -> Iterator[tuple[StringIO, StringIO]]:
    out, err = StringIO(), StringIO()
    real_out, real_err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Tee(real_out, out), _Tee(real_err, err)
    try:
        yield out, err
    finally:
        sys.stdout, sys.stderr = real_out, real_err
