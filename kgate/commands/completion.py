"""`kgate completion bash|zsh|fish`: a shell completion script, generated from kgate's own argument parser.

The script is static: it lists every subcommand with its flags, the values of flags that take one of a few
(`--format`, `--color`, ...), the rule codes and names from the rule registry where a flag or an argument names
rules (`--select`, `--ignore`, `kgate explain`; after the last comma of a list), files where a flag or an
argument names one, and is made again by running the command after an upgrade. Nothing runs kgate on a Tab press (argcomplete's way, which would import kgate each
time), and one generator covers the three shells (shtab, the library that generates such scripts, has no fish).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

# Flags and arguments whose value is a file or a folder (the rest take a value to type, not to complete).
_FILE_METAVARS = {"FILE", "DIR"}
# Flags and arguments that name rules: a comma-separated list of codes, prefixes, names or ALL; or one rule.
_RULES_METAVAR, _RULE_METAVAR = "CODES", "CODE"


@dataclass(frozen=True)
class Rules:
    """What completes where rules are named, from the registry: (word, description) pairs."""

    one: list[tuple[str, str]]  # `kgate explain`: every code and every name
    listed: list[tuple[str, str]]  # `--select`: also ALL and each code prefix of three characters


def rules() -> Rules:
    from kgate import rules as registry  # type: ignore[attr-defined]

    one = [(code, name) for code, name, _module in registry.REGISTRY]
    one += [(name, code) for code, name, _module in registry.REGISTRY]
    prefixes = sorted({code[:3] for code, _name, _module in registry.REGISTRY})
    listed = [("ALL", "every rule"), *((prefix, f"every {prefix}xx rule") for prefix in prefixes), *one]
    return Rules(one, listed)


@dataclass
class Flag:
    options: list[str]
    help: str
    takes_value: bool
    choices: list[str] = field(default_factory=list)
    files: bool = False
    rules: bool = False  # a comma-separated list of rules


@dataclass
class Command:
    name: str
    help: str
    flags: list[Flag]
    words: list[str]  # the values a positional argument takes (`baseline update|show`), if it takes a few
    files: bool  # positional arguments are files (`lint PATHS`, `merge INPUTS`)
    command: bool  # the rest of the line is a command of its own (`capture -- COMMAND`)
    rule: bool = False  # the positional argument is a rule (`explain CODE`)


def commands(parser: argparse.ArgumentParser) -> list[Command]:
    """Each subcommand of `parser` as what a completion script needs of it."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in sub._choices_actions}
    out = []
    for name, child in sub.choices.items():
        flags, words, files, command, rule = [], [], False, False, False
        for action in child._actions:
            if action.help == argparse.SUPPRESS:
                continue
            if action.option_strings:
                flags.append(Flag(list(action.option_strings), action.help or "", action.nargs != 0,
                                  [str(c) for c in action.choices or ()],
                                  str(action.metavar) in _FILE_METAVARS, action.metavar == _RULES_METAVAR))
            elif action.nargs == argparse.REMAINDER:
                command = True
            elif action.choices:
                words += [str(c) for c in action.choices]
            elif action.nargs in ("*", "+"):
                files = True
            elif action.metavar == _RULE_METAVAR:
                rule = True
        out.append(Command(name, helps.get(name, ""), flags, words, files, command, rule))
    return out


def bash(cmds: list[Command], known: Rules) -> str:
    lines = ["# bash completion for kgate (made by `kgate completion bash`)",
             f'_kgate_rule="{" ".join(word for word, _what in known.one)}"',
             f'_kgate_rules="{" ".join(word for word, _what in known.listed)}"',
             "# Rules after the last comma of the word: --select KG201,run<Tab>",
             "_kgate_complete_rules() {",
             '    local head=""',
             '    [[ "$cur" == *,* ]] && head="${cur%,*},"',
             '    COMPREPLY=($(compgen -P "$eq$head" -W "$_kgate_rules" -- "${cur##*,}"))',
             "}",
             "_kgate() {",
             '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" cmd="" eq="" i',
             "    # --flag=value: bash makes the = a word of its own",
             '    if [[ "$cur" == "=" && "$prev" == --* ]]; then',
             '        eq="="; cur=""',
             '    elif [[ "$prev" == "=" ]] && ((COMP_CWORD > 1)); then',
             '        prev="${COMP_WORDS[COMP_CWORD-2]}"',
             "    fi",
             "    for ((i = 1; i < COMP_CWORD; i++)); do",
             '        case "${COMP_WORDS[i]}" in -*) ;; *) cmd="${COMP_WORDS[i]}"; break ;; esac',
             "    done",
             '    if [[ -z "$cmd" ]]; then',
             f'        COMPREPLY=($(compgen -W "{" ".join(c.name for c in cmds)} --help --version" -- "$cur"))',
             "        return",
             "    fi",
             '    case "$cmd" in']
    for c in cmds:
        lines.append(f"    {c.name})")
        lines.append('        case "$prev" in')
        for f in c.flags:
            if f.choices:
                lines.append(f'            {"|".join(f.options)}) COMPREPLY=($(compgen -P "$eq" -W "{" ".join(f.choices)}" '
                             f'-- "$cur")); return ;;')
            elif f.rules:
                lines.append(f'            {"|".join(f.options)}) _kgate_complete_rules; return ;;')
            elif f.files:
                lines.append(f'            {"|".join(f.options)}) COMPREPLY=($(compgen -P "$eq" -f -- "$cur")); '
                             f'return ;;')
            elif f.takes_value:
                lines.append(f"            {'|'.join(f.options)}) return ;;")
        lines.append("        esac")
        options = " ".join(o for f in c.flags for o in f.options)
        lines.append(f'        if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "{options}" -- "$cur")); '
                     f"return; fi")
        if c.words:
            lines.append(f'        COMPREPLY=($(compgen -W "{" ".join(c.words)}" -- "$cur"))')
        if c.rule:
            lines.append('        COMPREPLY=($(compgen -W "$_kgate_rule" -- "$cur"))')
        lines.append("        ;;")
    lines += ["    esac", "}", "complete -o default -F _kgate kgate", ""]
    return "\n".join(lines)


def _zsh_text(text: str) -> str:
    """A description inside an `_arguments` spec, inside single quotes."""
    text = text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]").replace(":", "\\:")
    return text.replace("'", "'\\''")


def zsh(cmds: list[Command], known: Rules) -> str:
    lines = ["#compdef kgate", "# zsh completion for kgate (made by `kgate completion zsh`)", "",
             "_kgate_rule() {", "    local -a rules", "    rules=("]
    lines += [f"        '{_zsh_text(word)}:{_zsh_text(what)}'" for word, what in known.one]
    lines += ["    )", "    _describe 'rule' rules", "}", "",
              "# A comma-separated list of rules: --select KG201,run<Tab>", "_kgate_rules() {",
              "    _values -s , 'rule' \\"]
    lines += [f"        '{_zsh_text(word)}[{_zsh_text(what)}]'" + (" \\" if i < len(known.listed) - 1 else "")
              for i, (word, what) in enumerate(known.listed)]
    lines += ["}", "", "_kgate() {",
             "    local -a commands", "    commands=("]
    lines += [f"        '{c.name}:{_zsh_text(c.help)}'" for c in cmds]
    lines += ["    )",
              "    if (( CURRENT == 2 )); then",
              "        _describe 'command' commands",
              "        return",
              "    fi",
              "    local cmd=${words[2]}",
              "    shift words",
              "    (( CURRENT-- ))",
              "    case $cmd in"]
    for c in cmds:
        specs = []
        for f in c.flags:
            value = ""
            if f.choices:
                value = f":value:({' '.join(f.choices)})"
            elif f.rules:
                value = ":rule:_kgate_rules"
            elif f.files:
                value = ":file:_files"
            elif f.takes_value:
                value = ":value: "
            for option in f.options:
                specs.append(f"'{option}[{_zsh_text(f.help)}]{value}'")
        if c.words:
            specs.append(f"':argument:({' '.join(c.words)})'")
        if c.rule:
            specs.append("':rule:_kgate_rule'")
        if c.files:
            specs.append("'*:file:_files'")
        if c.command:
            specs.append("'*::command:_normal'")
        lines.append(f"        {c.name})")
        lines.append("            _arguments \\")
        lines += [f"                {spec} \\" for spec in specs]
        lines.append("            ;;")
    lines += ["    esac", "}", "", '_kgate "$@"', ""]
    return "\n".join(lines)


def _fish_text(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish(cmds: list[Command], known: Rules) -> str:
    names = " ".join(c.name for c in cmds)
    lines = ["# fish completion for kgate (made by `kgate completion fish`)", "complete -c kgate -f",
             "# Rules after the last comma of the token: --select KG201,run<Tab>",
             "function __kgate_rules",
             # the token less `--select=` (fish puts it back) up to its last comma: what each rule follows
             "    set -l head (string replace -r -- '^-[^=]*=' '' (commandline -ct) | string match -r -- '^.*,')",
             "    printf '%s\\t%s\\n' \\"]
    lines += [f"        {_fish_text(word)} {_fish_text(what)} \\" for word, what in known.listed]
    lines += ["        | string replace -r -- '^' \"$head\"", "end"]
    lines += [f"complete -c kgate -n 'not __fish_seen_subcommand_from {names}' -l help -d 'show the help'",
              f"complete -c kgate -n 'not __fish_seen_subcommand_from {names}' -l version -d 'show the version'"]
    for c in cmds:
        lines.append(f"complete -c kgate -n 'not __fish_seen_subcommand_from {names}' -a {c.name} "
                     f"-d {_fish_text(c.help)}")
    for c in cmds:
        when = f"-n '__fish_seen_subcommand_from {c.name}'"
        for f in c.flags:
            parts = [f"complete -c kgate {when}"]
            for option in f.options:
                parts.append(f"-l {option[2:]}" if option.startswith("--") else f"-s {option[1:]}")
            if f.choices:
                parts.append(f"-x -a {_fish_text(' '.join(f.choices))}")
            elif f.rules:
                parts.append("-x -a '(__kgate_rules)'")
            elif f.files:
                parts.append("-r -F")
            elif f.takes_value:
                parts.append("-x")
            parts.append(f"-d {_fish_text(f.help)}")
            lines.append(" ".join(parts))
        if c.words:
            lines.append(f"complete -c kgate {when} -a {_fish_text(' '.join(c.words))}")
        if c.rule:
            lines += [f"complete -c kgate {when} -a {_fish_text(word)} -d {_fish_text(what)}" for word, what in known.one]
        if c.files or c.command:
            lines.append(f"complete -c kgate {when} -F")
    return "\n".join(lines) + "\n"


SHELLS: dict[str, Callable[[list[Command], Rules], str]] = {"bash": bash, "zsh": zsh, "fish": fish}


def run(args: argparse.Namespace) -> int:
    from kgate.cli import build_parser

    sys.stdout.write(SHELLS[args.shell](commands(build_parser()), rules()))
    return 0
