"""`kgate` command line: parse arguments, dispatch to `kgate.commands.<verb>.run`.

Exit codes: 0 clean, 1 findings (or a failing ratchet), 2 usage,
configuration or toolchain errors. A user's mistake never prints a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any, cast

from kgate import __version__
from kgate.core.errors import KgateError
from kgate.core.schema import FAIL_ON, LANGUAGES

# The report formats, one vocabulary for every command. `text` is the report for a person, the name ruff gives it
# (`ruff rule --output-format text`); `terminal`, what check, lint, merge and diff called it in 0.1, stays an alias.
FORMATS = ("text", "json", "sarif", "github", "junit")
FORMAT_ALIASES = {"terminal": "text"}
COMMANDS = {
    "check": "compile registered kernels and run every rule (the gate)",
    "lint": "source rules only: no compiling, no import of the project's code",
    "explain": "print a rule's documentation",
    "rules": "list every rule",
    "baseline": "re-pin the ratchet baseline",
    "doctor": "show which compilers and tools kgate found",
    "ulp": "run the bundled kernels' precision tests",
    "audit": "write the HTML and Markdown audit report",
    "merge": "combine the JSON results of sharded runs",
    "capture": "record the Triton specialisations a command launches",
    "diff": "compare every kernel's SASS with a base revision or another Triton release",
    "completion": "print a shell completion script (bash, zsh or fish)",
}

# The epilog of each subcommand's --help: a few command lines that show how it is used.
EXAMPLES = {
    "check": ["kgate check", "kgate check --target sm_120a --kernel 'matmul*'",
              "kgate check --format github --fail-on warning", "kgate check --show-kernels --sass",
              "kgate check --shard 1/4 --format json -o shard-1.json"],
    "lint": ["kgate lint", "kgate lint kernels/ tests/test_norm.py", "kgate lint --select KG2 --ignore runtime-autotune",
             "kgate lint --show-settings kernels/norm.py", "kgate lint --show-files",
             "kgate lint --format sarif -o lint.sarif"],
    "explain": ["kgate explain KG103", "kgate explain spill --format json"],
    "rules": ["kgate rules", "kgate rules --format json"],
    "baseline": ["kgate baseline show", "kgate baseline update", "kgate baseline update --accept-new"],
    "doctor": ["kgate doctor", "kgate doctor --config ci/kgate.toml"],
    "ulp": ["kgate ulp", "kgate ulp --device cpu -k softmax"],
    "audit": ["kgate audit", "kgate audit -o audit --profile rtx5090", "kgate audit --diff origin/main"],
    "merge": ["kgate merge shard-*.json", "kgate merge shard-*.json --format sarif -o kgate.sarif"],
    "capture": ["kgate capture -- pytest tests/", "kgate capture --device cpu --target sm_120a -- python bench.py",
                "kgate capture --replace --verify -- pytest -x tests/test_matmul.py"],
    "diff": ["kgate diff", "kgate diff origin/main --kernel 'attn*'", "kgate diff --triton 3.4.0 --require-identical"],
    "completion": ["kgate completion bash > ~/.local/share/bash-completion/completions/kgate",
                   "kgate completion zsh > \"${fpath[1]}/_kgate\"",
                   "kgate completion fish > ~/.config/fish/completions/kgate.fish"],
}


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, minus `import shutil` (with its archive modules) only to read the width:
    every `add_argument` builds one, and the commit hook pays for each import."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        if width is None:
            try:
                width = int(os.environ.get("COLUMNS", "0")) or os.get_terminal_size(sys.stdout.fileno()).columns
            except (ValueError, OSError, AttributeError):  # not a terminal, or no stdout at all
                width = 80
            width -= 2
        super().__init__(prog, indent_increment, max_help_position, width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        # A text of several lines (the examples) keeps its lines; a one-line description is wrapped as usual.
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        raise SystemExit(f"kgate: error: {message}{_choice_hint(message)}")

    def option_strings(self) -> list[str]:
        return [option for action in self._actions for option in action.option_strings]

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """An argument whose value names something (`_NAMED`) refuses an empty value, unless it has a type of its own
        or is an option whose value may be left out (`--show-settings` alone means stdout)."""
        optional_value = bool(args) and str(args[0]).startswith("-") and kwargs.get("nargs") == "?"
        if args and kwargs.get("metavar") in _NAMED and "type" not in kwargs and not optional_value:
            kwargs["type"] = _named
        return super().add_argument(*args, **kwargs)


# The values that name a file, a folder, a target, a kernel glob or a revision: an empty one is a mistake, never the
# option left out (`--config ""` would read as no `--config`, the nearest configuration; `-o ""` as stdout;
# `capture --target ""` as the first configured target; `diff ""`, an unset variable's revision, as the default
# base).
_NAMED = frozenset({"FILE", "DIR", "SM", "GLOB", "BASE"})


def _named(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def _choice_hint(message: str) -> str:
    """argparse's "invalid choice: 'chek' (choose from 'check', ...)" gets the nearest choice named."""
    import re

    # Choices are quoted up to Python 3.13 and bare from 3.14 on.
    found = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)$", message)
    if found is None:
        return ""
    from kgate.support.suggest import closest

    near = closest(found.group(1), [choice.strip("'") for choice in found.group(2).split(", ")])
    return f"; did you mean {near!r}?" if near else ""


def _unrecognized(parser: _Parser, extras: list[str]) -> None:
    """The subcommand's own usage and error for arguments it does not know, with the nearest flag it has."""
    message = f"unrecognized arguments: {' '.join(extras)}"
    flags = [arg.split("=", 1)[0] for arg in extras if arg.startswith("-")]
    if flags:
        from kgate.support.suggest import closest

        near = closest(flags[0], [o for o in parser.option_strings() if o.startswith("--" if flags[0][:2] == "--"
                                                                                     else "-")])
        if near:
            message += f"; did you mean {near!r}?"
    parser.error(message)


def _releases(text: str, option: str = "--triton") -> str:
    """`--triton VERSION[,VERSION]`, `--cute-dsl VERSION[,VERSION]`: release numbers, checked here so that no command
    takes an empty or malformed list for no list at all (`--triton ""` would otherwise read as no `--triton`)."""
    from kgate.compile.environments import DISTRIBUTIONS, parse_versions
    from kgate.core.errors import KgateError

    try:
        parse_versions(text, next(d for d in DISTRIBUTIONS if d.option == option))
    except KgateError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _dsl_releases(text: str) -> str:
    return _releases(text, "--cute-dsl")


def _positive_int(text: str) -> int:
    """`-j N`: a count of workers, as the configuration's `jobs` (0 or a negative number is a mistake)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def _format_name(text: str) -> str:
    """`--format`'s value, an alias under its one name (argparse then checks it against the choices)."""
    return FORMAT_ALIASES.get(text, text)


def add_format(p: argparse.ArgumentParser, choices: Sequence[str], what: str) -> None:
    """`--format` and ruff's `--output-format`, the same flag on every command that has one."""
    p.add_argument("--format", "--output-format", dest="format", type=_format_name, choices=choices, default="text",
                   help=f"{what} (default: text; `terminal` is another name for text)")


def _add_terminal(p: argparse.ArgumentParser) -> None:
    p.add_argument("--color", "--colour", dest="color", choices=("auto", "always", "never"), default="auto",
                   help="colour in the terminal report: auto (default) follows NO_COLOR, FORCE_COLOR and whether "
                        "stdout is a terminal")


def _add_shown(p: argparse.ArgumentParser, command: str) -> None:
    p.add_argument("--show-settings", nargs="?", const="", default=None, metavar="FILE",
                   help="print the resolved configuration (for FILE: the rules that apply to it) and exit")
    p.add_argument("--show-files", action="store_true",
                   help="print the source files " + ("lint" if command == "lint" else "the source rules")
                        + " would read, one a line, and exit")


def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="pyproject.toml or kgate.toml (default: nearest)")
    p.add_argument("--select", metavar="CODES", help="comma-separated codes, prefixes or names (replaces config)")
    p.add_argument("--extend-select", metavar="CODES", help="add to the selection")
    p.add_argument("--ignore", metavar="CODES", help="remove from the selection")


def _add_output(p: argparse.ArgumentParser) -> None:
    add_format(p, FORMATS, "the report's format")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    p.add_argument("--statistics", action="store_true", help="one line per rule: count, code, name")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    p.add_argument("--fail-on", choices=FAIL_ON, default=None,
                   help="lowest severity that fails the run (default: error)")
    p.add_argument("-q", "--quiet", action="store_true", help="only the findings and the summary line")
    p.add_argument("--no-baseline", action="store_true", help="ignore the baseline file")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")


def _add_fixing(p: argparse.ArgumentParser) -> None:
    """`kgate lint`'s options that change files (kgate.pipeline.fix)."""
    p.add_argument("--fix", action="store_true", help="apply the safe fixes, then report what is left")
    p.add_argument("--unsafe-fixes", action="store_true",
                   help="with --fix, --diff or --show-fixes: also the fixes that change what the build or the tests "
                        "do (each says what it changes)")
    p.add_argument("--diff", action="store_true",
                   help="print the fixes as a unified diff and change nothing (exit 1 when there is one)")
    p.add_argument("--show-fixes", action="store_true", help="list the fixes applied (with --fix) or available")
    p.add_argument("--add-ignore", action="store_true",
                   help="pin every finding with a `kgate: ignore[CODE]` comment whose reason is a placeholder "
                        "that KG003 reports until it is written")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line; `only`: build just that subcommand (each parser costs a pre-commit run time)."""
    parser = _Parser(prog="kgate", description="Gate GPU kernel repositories on what the compiler produced.")
    parser.add_argument("--version", action="version", version=f"kgate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers: dict[str, _Parser] = {}
    parser.set_defaults(subparsers=subparsers)
    for name, help_text in COMMANDS.items():
        if only is not None and name != only:
            continue
        epilog = "examples:\n" + "".join(f"  {line}\n" for line in EXAMPLES[name])
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=epilog)
        subparsers[name] = p
        if name in ("check", "lint", "baseline", "audit"):
            _add_selection(p)
        if name in ("check", "lint"):
            _add_output(p)
            _add_shown(p, name)
            p.add_argument("--no-respect-gitignore", action="store_true",
                           help="also lint what .gitignore and .ignore files ignore (config: respect-gitignore)")
        if name in ("check", "baseline", "audit"):
            p.add_argument("--target", action="append", metavar="SM", help="only this target (repeatable)")
            p.add_argument("--kernel", action="append", metavar="GLOB", help="only kernels matching (repeatable)")
            p.add_argument("-j", "--jobs", type=_positive_int, metavar="N", help="compile workers (default: all cores)")
            p.add_argument("--sass", action="store_true", help="disassemble every kernel (slower)")
            p.add_argument("-v", "--verbose", action="store_true", help="also show the toolchain found")
        if name in ("check", "baseline"):
            p.add_argument("--shard", metavar="I/N", help="gate only slice I of N (1-based)")
        if name == "check":
            p.add_argument("--language", choices=LANGUAGES, help="only the kernels of one language: Triton (Gluon included), the CuTe DSL or CUDA C++")
            p.add_argument("--show-kernels", action="store_true",
                           help="every kernel variant in the table (default: only those with findings)")
            p.add_argument("--triton", metavar="VERSION[,VERSION]", type=_releases,
                           help="also compile the Triton kernels under these Triton releases, each in an "
                                "environment kgate makes once and keeps, and report what changes")
            p.add_argument("--cute-dsl", metavar="VERSION[,VERSION]", type=_dsl_releases,
                           help="also compile the CuTe DSL kernels under these releases of nvidia-cutlass-dsl, as "
                                "--triton does")
        if name in ("lint", "baseline"):
            p.add_argument("paths", nargs="*", help="files or folders (default: the current folder, as ruff has it)"
                           if name == "lint" else "files or folders (default: the project)")
        if name == "lint":
            p.add_argument("--force-exclude", action="store_true",
                           help="apply exclude/extend-exclude to paths named on the command line too")
            _add_fixing(p)
        if name == "explain":
            p.add_argument("code", metavar="CODE", help="rule code or name, e.g. KG103 or spill")
            add_format(p, ("text", "json"), "the documentation as text or as a JSON record")
        if name == "rules":
            add_format(p, ("text", "json"), "a table, or JSON records with each rule's documentation")
        if name == "baseline":
            p.add_argument("action", choices=("update", "show"), help="update: re-pin; show: print the file")
            p.add_argument("--accept-new", action="store_true", help="also pin new findings and worse metrics")
            p.add_argument("--fail-on", choices=FAIL_ON, default=None,
                           help="lowest severity that the baseline tracks (default: error)")
        if name == "ulp":
            p.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
            p.add_argument("-k", dest="keyword", metavar="EXPR", help="only tests matching (pytest -k)")
        if name == "audit":
            p.add_argument("-o", "--output", metavar="DIR", default="kgate-audit",
                           help="folder for report.html, report.md and summary.md (default: kgate-audit)")
            p.add_argument("--profile", action="append", metavar="CARD",
                           help="device profile to show (repeatable; default: the target's cards)")
            p.add_argument("--no-baseline", action="store_true")
            p.add_argument("--diff", metavar="BASE",
                           help="also show the SASS of the variants that changed since BASE (a git revision), side by "
                                "side")
        if name == "merge":
            p.add_argument("inputs", nargs="+", help="JSON results of `kgate check --format json --shard I/N`")
            _add_output(p)
            p.add_argument("--config", metavar="FILE")
        if name == "doctor":
            p.add_argument("--config", metavar="FILE")
        if name == "capture":
            p.add_argument("--config", metavar="FILE", help="pyproject.toml or kgate.toml (default: nearest)")
            p.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto",
                           help="gpu: run and record; cpu: bind launches for --target, run nothing "
                                "(default: gpu when one is present)")
            p.add_argument("--target", metavar="SM", help="target to bind for on a machine without a GPU "
                                                          "(default: the first configured target)")
            p.add_argument("-o", "--output", metavar="FILE", help="capture file (default: the configured one, "
                                                                  "kgate-capture.toml)")
            p.add_argument("--replace", action="store_true",
                           help="drop the file's entries of every kernel this run launched before adding its own")
            p.add_argument("--counts", action="store_true", help="also record launch counts (they change run to run)")
            p.add_argument("--verify", action="store_true",
                           help="on a GPU: compare kgate's compile of each specialisation with the loaded kernel")
            p.add_argument("-j", "--jobs", type=_positive_int, metavar="N", help="compile workers for --verify")
            p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command to run")
        if name == "diff":
            _add_diff(p)
        if name == "completion":
            p.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell to complete for")
        _add_terminal(p)
    return parser


def _add_diff(p: argparse.ArgumentParser) -> None:
    p.add_argument("base", nargs="?", metavar="BASE",
                   help="git revision to compare with (default: the merge base with the upstream default branch, "
                        "or HEAD~1 on that branch)")
    p.add_argument("--triton", metavar="VERSION", type=_releases,
                   help="compare with another Triton release instead (the working tree under both)")
    p.add_argument("--require-identical", action="store_true",
                   help="exit 1 when any selected variant's SASS is not identical")
    p.add_argument("--config", metavar="FILE", help="pyproject.toml or kgate.toml (default: nearest)")
    p.add_argument("--target", action="append", metavar="SM", help="only this target (repeatable)")
    p.add_argument("--kernel", action="append", metavar="GLOB", help="only kernels matching (repeatable)")
    p.add_argument("--language", choices=LANGUAGES, help="only the kernels of one language: Triton (Gluon included), the CuTe DSL or CUDA C++")
    p.add_argument("-j", "--jobs", type=_positive_int, metavar="N", help="compile workers (default: all cores)")
    add_format(p, ("text", "json", "markdown"), "the report's format")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    p.add_argument("-q", "--quiet", action="store_true", help="no SASS lines in the terminal report")
    p.add_argument("--side-json", action="store_true", help=argparse.SUPPRESS)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = args_list[0] if args_list else None
    parser = build_parser(command if command in COMMANDS else None)
    try:
        args, extras = parser.parse_known_args(args_list)
        if extras:
            _unrecognized(cast(_Parser, args.subparsers.get(args.command) or parser), extras)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 2
        return int(exc.code or 0)
    if args.command is None:
        parser.print_help()
        return 2
    del args.subparsers
    args.argv = args_list  # the command line as given, for the run record of `kgate check`
    if isinstance(getattr(args, "target", None), list):  # `--target X --target X` gates X once
        args.target = list(dict.fromkeys(args.target))
    try:
        module = importlib.import_module(f"kgate.commands.{args.command}")
        return int(module.run(args))
    except KgateError as exc:
        from kgate.report.escape import terminal  # the message may quote a path or a name from the project

        print(f"kgate: error: {terminal(str(exc), line_start=False)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # SIGINT or SIGTERM (kgate.support.interrupts): cleaned up on the way here
        from kgate.support import interrupts

        return interrupts.report(interrupts.signal_of(exc))
    except BrokenPipeError:
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
