"""`kgate capture -- COMMAND`: record every Triton specialisation the command launches, and every CuTe DSL
`cute.compile` call it makes, into the capture file.

On a machine with a GPU the command runs as usual and its launches are recorded; on one without,
launches go through Triton's launcher for the target and are recorded without running (run the
project's ops or tests on CPU tensors). The command's exit code is passed through; kgate's own
failures print a `kgate:` line.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgate.capture import session
from kgate.commands.common import config_from
from kgate.core.config import KNOWN_TARGETS, Config
from kgate.core.errors import CaptureError, ConfigError
from kgate.report.escape import terminal
from kgate.support import tools

if TYPE_CHECKING:
    from kgate.facts.run import CompileRun


def run(args: argparse.Namespace) -> int:
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise ConfigError("kgate capture needs a command to run: kgate capture -- python -m pytest tests/")
    config = config_from(args)
    target = args.target or config.targets[0]
    if target not in KNOWN_TARGETS:
        raise ConfigError(f"--target {target}: unknown target (known: {', '.join(KNOWN_TARGETS)})")
    gpu = session.gpu_present() if args.device == "auto" else args.device == "gpu"
    if args.verify and not gpu:
        raise ConfigError("--verify compares kgate's compile with the kernels a GPU loaded: it needs a GPU "
                          "(this machine has none, or --device cpu was given)")
    output = Path(args.output) if args.output else config.root / config.capture
    display = args.output or config.capture
    note = session.interpreter_note()
    with session.scratch() as folder:
        env = session.command_env(config, folder, offline=not gpu, target=target, live=args.verify,
                                  counts=args.counts)
        code = tools.run_user_command(command, env)
        recorded = session.read_records(config, folder)
    for line in session.describe(recorded):
        print(terminal(line), file=sys.stderr)
    seen = len(recorded.file.entries) + len(recorded.file.cute)
    kernels = len(recorded.file.kernels())
    if recorded.incomplete:  # not a whole record of what ran, as an interrupted capture is not
        print(f"kgate: the capture is incomplete: a launch may be missing; {display} is unchanged", file=sys.stderr)
        return code if code != 0 else 2
    if seen == 0:
        hint = note or _nothing(recorded, gpu) + _other_python(command, env, recorded)
        if code != 0 and not note and config.setup is None and recorded.started:
            hint += "; if its modules fail to import without a GPU, give them a set-up hook (`setup`)"
        print(f"kgate: nothing captured: {hint}; {display} is unchanged", file=sys.stderr)
        return code if code != 0 else 2
    try:
        total, new = session.fold(config, recorded, output=output, display=display, replace=args.replace)
    except CaptureError as exc:
        print(f"kgate: error: {terminal(str(exc), line_start=False)}", file=sys.stderr)
        return code if code != 0 else 2
    mode = "on the GPU" if gpu else f"offline for {target}"
    print(f"kgate capture: {seen} specialisation(s) of {kernels} kernel(s) launched {mode} by "
          f"{recorded.processes} process(es); {display} holds {total} ({new} new); the command exited {code}",
          file=sys.stderr)
    if args.verify:
        from kgate.pipeline.capture_verify import verify

        problem = verify(config, recorded, jobs=args.jobs, compile_facts=_captured_facts)
        if problem and code == 0:
            return 1
    return code


def _nothing(recorded: session.Recorded, gpu: bool) -> str:
    """Why nothing was captured, as far as the command's processes tell."""
    if recorded.started == 0:
        return ("no Python process of the command ran kgate's recorder (a command that sets PYTHONPATH instead of "
                "adding to it, or runs Python with -E or -I, leaves it out)")
    if recorded.imported == 0:
        return f"none of the command's {recorded.started} Python process(es) imported Triton or the CuTe DSL"
    return ("the command ran no @triton.jit kernel of the project through Triton's launcher, and compiled no "
            "@cute.jit function of it with cute.compile"
            + ("" if gpu else " (on a machine without a GPU, run its ops on CPU tensors)")
            + ("; it imported the CuTe DSL: a compile cache of the project's own that loads what an earlier run "
               "compiled never calls cute.compile, so turn it off for the capture" if recorded.cute else ""))


def _other_python(command: list[str], env: dict[str, str], recorded: session.Recorded) -> str:
    """Where no process imported Triton and the command names Python by a bare name (`python`) that its PATH leads
    to another installation than the one kgate runs in (an environment not activated): which one ran."""
    import os
    import shutil

    name = command[0]
    if recorded.imported or os.sep in name or not name.startswith("python"):
        return ""
    found = shutil.which(name, path=env.get("PATH", os.environ.get("PATH")))
    if found is None or Path(found).parent == Path(sys.executable).parent:
        return ""
    return (f"; the command's `{name}` is {found}, not the Python kgate runs in ({sys.executable}): activate kgate's "
            f"environment, or name that interpreter in the command")


def _captured_facts(config: Config, entries: list[Any], target: str, jobs: int) -> CompileRun:
    """Captured specialisations and `cute.compile` calls compiled for one target into facts, as `kgate check` compiles
    them: for the target a live kernel ran on, whichever target the capture file says an entry was bound for."""
    from kgate.core.config import PythonEntry
    from kgate.core.cute import CuteEntry
    from kgate.core.selection import build_selection
    from kgate.evaluate.plan import selection_plan
    from kgate.facts.run import triton_facts

    calls: list[PythonEntry] = [e for e in entries if isinstance(e, CuteEntry)]
    specs = [e for e in entries if not isinstance(e, CuteEntry)]
    return triton_facts(replace(config, device_independent_launchers=True), calls, (target,), jobs=jobs,
                        plan=selection_plan(build_selection(config)), captured=specs)
