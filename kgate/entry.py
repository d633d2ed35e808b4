"""The `kgate` console script: replay an unchanged `kgate check` or `lint` before loading anything else.

Kept apart from `kgate.cli` so that the replay path imports neither
argparse nor any of kgate's own modules beyond `kgate.pipeline.fastpath`.
"""

from __future__ import annotations

import sys

from kgate.support import interrupts


def main() -> int:
    # SIGINT and SIGTERM are kgate's from its first instruction: even an import cut short is one line, not a traceback.
    return interrupts.run(_main)


def _main() -> int:
    from kgate.support import workdir

    problem = workdir.unusable()
    if problem is not None:
        print(f"kgate: error: {problem}", file=sys.stderr)
        return 2
    argv = sys.argv[1:]
    if argv[:1] not in (["check"], ["lint"]):
        from kgate.cli import main as full_run

        return full_run(argv)
    from kgate.pipeline import fastpath

    code = fastpath.replay(argv)
    if code is not None:
        return code
    from kgate.cli import main as full_run

    try:
        return full_run(argv)
    finally:
        fastpath.stated(argv)  # the states the replay took are this run's only
