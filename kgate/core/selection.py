"""Which rules run, at what severity, with which options: configuration resolved against the registry.

Codes, code prefixes ("KG1") and rule names ("spill") are accepted wherever
a rule is named; "ALL" selects everything. Unknown ones are errors. A
configuration that selects nothing runs every rule except the opt-in ones
(`kgate.rules.OPT_IN`), which run when named.

A kernel that was not compiled (KG001 compile-error, KG005 stale-capture) is
not gated at all, so those findings are never deselected into silence: they
are reported whatever `select`, `ignore`, `per-file-ignores` or `severity`
say, at their own severity, and naming them there to turn them off is an
error. What remains is a suppression comment with a reason, or a
registration's `targets` (a kernel is not built for the other targets).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass, field
from typing import Any

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.core.config import Config
from kgate.core.errors import ConfigError
from kgate.core.findings import Finding, Severity
from kgate.support.patterns import from_root, path_glob

# Findings that say a kernel was not compiled: always reported (see the module's docstring).
UNCOMPILED = frozenset({"KG001", "KG005"})


def _names() -> dict[str, str]:
    return {name: code for code, name, _module in registry.REGISTRY}


def resolve_codes(tokens: tuple[str, ...] | list[str], where: str) -> set[str]:
    """Codes named by a list of codes, prefixes, names or ALL; unknown tokens are errors."""
    all_codes = [code for code, _name, _module in registry.REGISTRY]
    names = _names()
    out: set[str] = set()
    for token in tokens:
        upper = token.upper()
        if upper == "ALL":
            out.update(all_codes)
        elif token in names:
            out.add(names[token])
        elif any(code.startswith(upper) for code in all_codes) and upper.startswith("KG"):
            out.update(code for code in all_codes if code.startswith(upper))
        else:
            raise ConfigError(f"{where}: unknown rule {token!r}{unknown_rule_hint(token)}")
    return out


def unknown_rule_hint(token: str) -> str:
    """The tail of an unknown-rule message: the nearest code or name, and where the list is."""
    from kgate.support.suggest import closest

    known = [word for code, name, _module in registry.REGISTRY for word in (code, name)]
    found = closest(token, known)
    return f"; did you mean {found!r}? (see `kgate rules`)" if found else " (see `kgate rules`)"


@dataclass(frozen=True)
class Selection:
    enabled: frozenset[str]
    severity: dict[str, Severity] = field(default_factory=dict)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()
    # The configuration's folder as the run names paths ("" for the run's own project, "sub/proj/" for one
    # nested in it, an absolute path with "/" for one elsewhere): its per-file-ignores match below it.
    base: str = ""
    # Every config of an autotuned launch gated at its rules' severity (`kgate.evaluate.configs`).
    strict_configs: bool = False

    def active(self, code: str) -> bool:
        return code in self.enabled

    def ignored_for(self, path: str, code: str) -> bool:
        if self.base and path.startswith(self.base):
            path = path[len(self.base):]
        return code not in UNCOMPILED and any(code in codes and _path_matches(path, pattern)
                                              for pattern, codes in self.per_file_ignores)

    def keep(self, finding: Finding) -> bool:
        return self.active(finding.code) and not self.ignored_for(finding.path, finding.code)


def _path_matches(path: str, pattern: str) -> bool:
    pattern, anchored = from_root(pattern)  # `./tests/*.py` is `tests/*.py` of the configuration's folder
    return bool(_glob(pattern).match(path) or _glob(pattern.rstrip("/") + "/*").match(path)) \
        or ("/" not in pattern and not anchored and fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], pattern))


@functools.lru_cache(maxsize=256)
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(path_glob(pattern))


def build_selection(config: Config, *, select: list[str] | None = None, extend_select: list[str] | None = None,
                    ignore: list[str] | None = None) -> Selection:
    """Resolve the configuration and command-line flags (flags win) into a Selection."""
    where = config.display()
    if select is not None and not select:
        # `--select "$CODES"` with the variable unset: a gate that runs no rule would pass anything.
        raise ConfigError("--select: names no rule (give codes, prefixes, names or ALL)")
    _refuse_uncompiled(config.ignore, f"{where}: ignore")
    _refuse_uncompiled(ignore or [], "--ignore")
    _refuse_uncompiled([t for t, level in config.severity.items() if level != "error"], f"{where}: severity")
    for pattern, codes in config.per_file_ignores.items():
        _refuse_uncompiled(codes, f"{where}: per-file-ignores.{pattern}")
    base = select if select is not None else list(config.select)
    # Nothing selected: every rule but the opt-in ones, which run when named.
    enabled = resolve_codes(base, "--select" if select is not None else f"{where}: select") if base \
        else set(registry.default_codes())
    enabled |= resolve_codes(list(config.extend_select), f"{where}: extend-select")
    enabled |= resolve_codes(extend_select or [], "--extend-select")
    enabled -= resolve_codes(list(config.ignore), f"{where}: ignore")
    enabled -= resolve_codes(ignore or [], "--ignore")
    enabled |= UNCOMPILED
    severity: dict[str, Severity] = {}
    for token, level in config.severity.items():
        for code in resolve_codes([token], f"{where}: severity") - UNCOMPILED:
            if level == "off":
                enabled.discard(code)
            else:
                severity[code] = Severity(level)
    names = _names()
    options: dict[str, dict[str, Any]] = {}
    for name, values in config.options.items():
        found = names.get(name) or (name if name in {c for c, _n, _m in registry.REGISTRY} else None)
        if found is None:
            raise ConfigError(f"{where}: options.{name}: unknown rule (options are keyed by rule name)"
                              f"{unknown_rule_hint(name)}")
        options[found] = values
    pfi = tuple((pattern, frozenset(resolve_codes(list(codes), f"{where}: per-file-ignores.{pattern}")))
                for pattern, codes in sorted(config.per_file_ignores.items()))
    # Validate options of every rule now, so a typo fails before any compiling.
    resolved = {}
    for code, _name, _module in registry.REGISTRY:
        if code in options:
            try:
                resolved[code] = registry.load(code).resolve_options(options[code])
            except ConfigError as exc:
                raise ConfigError(f"{where}: {exc}") from None
    return Selection(frozenset(enabled), severity, resolved, pfi, strict_configs=config.strict_configs)


def _refuse_uncompiled(tokens: tuple[str, ...] | list[str], where: str) -> None:
    """ConfigError for a list that turns off, by code or name, a finding that says a kernel was not compiled."""
    names = _names()
    for token in tokens:
        code = names.get(token, token.upper())
        if code in UNCOMPILED:
            raise ConfigError(f"{where}: {token} cannot be turned off: a kernel that is not compiled is not gated at "
                              f"all, so {code} is reported whatever the selection (suppress one with a reason, "
                              f"`# kgate: ignore[{code}] why`, or give a registration the `targets` it builds for)")


def rule_options(selection: Selection, code: str) -> dict[str, Any]:
    return registry.options(code, selection.options)
