"""Configuration: `[tool.kgate]` in pyproject.toml, or kgate.toml (same keys, top level).

Every key is checked here: an unknown key, a wrong type or a bad value is a
ConfigError that names the key and the file. Rule codes and rule options are
checked later against the rule registry (`kgate.core.selection`).
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgate.core import schema
from kgate.core.discovery import find_config
from kgate.core.entry import KernelEntry
from kgate.core.errors import ConfigError, KgateError, did_you_mean
from kgate.core.schema import (
    CUDA_COMPILERS,
    DEFAULT_EXCLUDE,
    EXPECTATIONS,
    KINDS,
    KNOWN_TARGETS,
    MAX_INT64,
    MAX_TIMEOUT,
    MAX_WARPS,
    SEVERITIES,
    SHAPE_KEYS,
)
from kgate.support.atomicio import read_input

if TYPE_CHECKING:
    from kgate.core.cute import CuteEntry

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


@dataclass(frozen=True)
class TritonEntry(KernelEntry):
    """One registered Triton kernel (from configuration or from `kgate.register`)."""

    kernel: str  # "pkg.module:function"
    signature: dict[str, str]  # may be empty when `args` gives every run-time argument's value
    constexprs: dict[str, Any] = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 3
    expect: tuple[str, ...] | None = None  # None: implied from the source
    pdl: bool = False
    kind: str = "other"
    variants: tuple[dict[str, Any], ...] = ()
    shapes: tuple[dict[str, int], ...] = ()
    divisible: tuple[str, ...] | None = None  # None: every pointer and integer argument
    # Example values of the run-time arguments, one table per launch to gate (empty: one launch made
    # from the signature and `divisible`); Triton's launcher derives the specialisation from them.
    args: tuple[dict[str, Any], ...] = ()
    # The targets the kernel is built for (None: every target of the run); on the others it is not compiled,
    # so a kernel written for one architecture does not fail the gate on another.
    targets: tuple[str, ...] | None = None
    origin: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel, "signature": self.signature, "constexprs": self.constexprs,
            "num_warps": self.num_warps, "num_stages": self.num_stages,
            "expect": list(self.expect) if self.expect is not None else None, "pdl": self.pdl,
            "kind": self.kind, "variants": list(self.variants), "shapes": list(self.shapes),
            "divisible": list(self.divisible) if self.divisible is not None else None,
            "args": [dict(a) for a in self.args],
            "targets": list(self.targets) if self.targets is not None else None,
        }


if TYPE_CHECKING:
    # A Python kernel's registration: Triton and Gluon (`TritonEntry`), the CuTe DSL (`CuteEntry`).
    PythonEntry = TritonEntry | CuteEntry


def __getattr__(name: str) -> Any:
    """`PythonEntry` (the CuTe DSL's model, `kgate.core.cute`, is imported where a configuration or a run uses it:
    a lint never does)."""
    if name == "PythonEntry":
        from kgate.core.cute import CuteEntry

        return TritonEntry | CuteEntry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class CudaEntry:
    """One `[[tool.kgate.cuda]]` table: CUDA C++ sources to compile and gate."""

    sources: tuple[str, ...]
    flags: tuple[str, ...] = ()
    compile_commands: str | None = None
    pdl: tuple[str, ...] = ()
    expect: dict[str, tuple[str, ...]] = field(default_factory=dict)
    launch_wrappers: tuple[str, ...] = ()
    kind: dict[str, str] = field(default_factory=dict)
    compiler: str = "auto"  # "auto" (nvcc, else NVRTC), "nvcc" or "nvrtc" (device-only sources)
    targets: tuple[str, ...] | None = None  # the targets its files are built for (None: every target of the run)
    torch: bool | str = "auto"  # compile as PyTorch extensions: "auto" (those that include torch headers), True, False
    origin: str = ""

    def builds_for(self, target: str) -> bool:
        return self.targets is None or target in self.targets


@dataclass(frozen=True)
class Config:
    root: Path
    source: Path | None = None
    targets: tuple[str, ...] = ("sm_120a",)
    triton: tuple[TritonEntry, ...] = ()
    cute: tuple[CuteEntry, ...] = ()
    cuda: tuple[CudaEntry, ...] = ()
    select: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    severity: dict[str, str] = field(default_factory=dict)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    baseline: str = "kgate-baseline.toml"
    capture: str = "kgate-capture.toml"  # the specialisations `kgate capture` recorded
    # Run before the project's kernel modules are imported (compile workers, captured commands):
    # "package.module:function" or a Python file, for projects that probe the device at import.
    setup: str | None = None
    # Captured entries gated on every target, not only on those their captures apply to.
    device_independent_launchers: bool = False
    # Findings in some configs of an autotuned launch kept at the rule's severity (not warnings).
    strict_configs: bool = False
    ratchet: str = "two-way"
    # A toolchain the baseline has no pins for: "auto" fails on CI (the CI variable set) and warns elsewhere.
    toolchain_change: str = "auto"
    fail_on: str = "error"
    cache_dir: str = ".kgate-cache"
    jobs: int | None = None
    timeout: float = 600.0
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    respect_gitignore: bool = True
    python_path: tuple[str, ...] = (".", "src")
    nvcc: str | None = None
    size_slack: int = 10
    # One line each: configured paths that lead out of the project folder (printed on stderr).
    notices: tuple[str, ...] = ()
    # A base revision's checkout (`kgate diff`): (the working tree's top, the checkout's top). What the revision
    # does not hold (a build's compile_commands.json) is read from the working tree, its paths moved to the checkout.
    checkout_of: tuple[str, str] | None = None

    def display(self) -> str:
        return _rel(self.source, self.root) if self.source else "(defaults)"

    def with_overrides(self, **changes: Any) -> Config:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


# --------------------------------------------------------------------------- loading


def load_config(path: Path | None = None, *, start: Path | None = None) -> Config:
    """Load and validate the configuration at `path`, or find it from `start` (default: cwd)."""
    if path is None:
        found = find_config(start or Path.cwd())
        if found is None:
            return Config(root=(start or Path.cwd()).resolve())
        path = Path(found)
    # The folder is resolved, not the file: a kgate.toml that is a link to a shared one configures the folder it
    # stands in, whose paths its patterns name.
    path = path.parent.resolve() / path.name
    if not path.exists():
        raise ConfigError(f"configuration file not found: {path}")
    if path.is_dir():
        raise ConfigError(f"configuration {path.name}/ is a folder: name its kgate.toml or pyproject.toml")
    data = _read_toml(path)
    if path.name == "pyproject.toml":
        tool = data.get("tool", {})
        if not isinstance(tool, dict) or "kgate" not in tool:
            # Named on the command line, it would otherwise configure nothing and let `kgate check` pass.
            raise ConfigError(f"{path.name}: no [tool.kgate] table: kgate's settings go there (or in a kgate.toml "
                              f"beside it)")
        table = tool["kgate"]
        prefix = "tool.kgate"
        if not isinstance(table, dict):
            raise ConfigError(f"{path.name}: tool.kgate: must be a table, not {_type_name(table)}")
    else:
        table = data
        prefix = ""
    return parse_config(table, root=path.parent, source=path, prefix=prefix)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        raw = read_input(path)
    except OSError as exc:
        raise ConfigError(f"cannot read it: {exc.strerror}", path=path.name) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"not valid UTF-8 (byte {exc.start})", path=path.name, line=line) from None
    try:
        return tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError, or a number too long for int()
        message, where = toml_error(exc, text)
        raise ConfigError(f"invalid TOML: {message}", path=path.name, line=where) from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ConfigError(f"invalid TOML: {TOO_DEEP}", path=path.name) from None


TOO_DEEP = "arrays or inline tables nested too deeply to read"


def toml_string(value: str) -> str:
    """A TOML basic string. JSON's escaping covers the control characters below U+0020; TOML also forbids
    DEL raw, and characters that show nothing or reorder what a reader sees (C1 controls, bidirectional
    overrides, zero-width and line-separator characters) are escaped too: kgate's files are reviewed as text.
    A lone surrogate (a file name that is not UTF-8) has no TOML spelling: UnicodeEncodeError."""
    import json

    value.encode("utf-8")  # raises on a lone surrogate
    return _INVISIBLE.sub(_escaped, json.dumps(value, ensure_ascii=False))


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


# DEL, the C1 controls, and the format and separator characters (Unicode categories Cf, Zl, Zp): written out
# here, so that the same value is written the same way under every Python.
_INVISIBLE = re.compile("[\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
                        "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
                        "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
                        "\U000e0001\U000e0020-\U000e007f]")


def toml_document(raw: bytes, where: str, error: type[KgateError], not_utf8: str) -> tuple[dict[str, Any], str]:
    """(the table, the text) of a TOML file kgate reads (the baseline, the capture file), or `error` naming the
    line: `not_utf8` says what to do about bytes that are not UTF-8."""
    try:
        text = raw.decode("utf-8-sig")  # an editor's byte order mark is accepted, as in the configuration
    except UnicodeDecodeError as exc:
        raise error(not_utf8, path=where, line=raw[: exc.start].count(b"\n") + 1) from None
    try:
        return tomllib.loads(text), text
    except ValueError as exc:  # TOMLDecodeError, or a number too long for int()
        message, line = toml_error(exc, text)
        raise error(f"invalid TOML: {message}", path=where, line=line) from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise error(f"invalid TOML: {TOO_DEEP}", path=where) from None


def toml_error(exc: Exception, source: str = "") -> tuple[str, int | None]:
    """The message and line of a TOML decode error (Python 3.11's tomllib puts the line in the text).

    tomllib reads integers with int(), which refuses more than 4300 digits with a plain ValueError
    that has no position: that one is found in `source`.
    """
    import re

    if not isinstance(exc, tomllib.TOMLDecodeError):
        digits = re.search(r"[0-9_]{4000,}", source)
        return "a number too long to read", source.count("\n", 0, digits.start()) + 1 if digits else None
    text = str(exc)
    line = getattr(exc, "lineno", None)
    match = re.search(r" \(at line (\d+), column \d+\)", text)
    if match:
        line = line or int(match.group(1))
        text = text[: match.start()] + text[match.end():]
    marker = re.search(r"^(<{7}|={7}|>{7})(?:[ \t][^\n]*)?$", source, re.MULTILINE)
    if marker:  # git's conflict markers: what TOML cannot read is a merge left half done
        return (f"{text.strip()}: the file holds an unresolved merge conflict (`{marker.group(1)}` on line "
                f"{source.count(chr(10), 0, marker.start()) + 1}); resolve it"), line
    return text.strip(), line


def parse_config(table: dict[str, Any], *, root: Path, source: Path | None, prefix: str = "") -> Config:
    """A Config from the keys of `[tool.kgate]`: each is read as its entry of `kgate.core.schema` says, by the
    reader of its kind, or by its own reader below for the keys that need more than their type checked."""
    where = _rel(source, root) if source else "configuration"
    ctx = _Ctx(where, prefix)
    ctx.no_unknown(table, schema.keys(schema.SETTINGS), "")
    kwargs: dict[str, Any] = {"root": root, "source": source}
    for setting in schema.SETTINGS:
        if setting.key in table:
            special = _SPECIAL.get(setting.key)
            value = table[setting.key]
            kwargs[setting.field] = special(value, ctx, root) if special else read_plain(value, setting, ctx)
    kwargs["notices"] = outside_paths(kwargs, root, ctx, source)
    return Config(**kwargs)


def read_plain(value: Any, setting: schema.Setting, ctx: _Ctx) -> Any:
    """A key whose type (of `kgate.core.schema`) says all there is to check."""
    key = setting.key
    if setting.kind == "strings":
        return tuple(ctx.str_list(value, key))
    if setting.kind == "string":
        return ctx.string(value, key)
    if setting.kind == "boolean":
        return ctx.boolean(value, key)
    if setting.kind == "choice":
        return ctx.choice(value, key, setting.choices)
    if setting.kind == "targets":
        return ctx.targets(value, key)
    if setting.kind == "integer" and setting.minimum == 1:
        return ctx.positive_int(value, key)
    if setting.kind == "integer" and setting.minimum == 0:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ctx.error(key, "must be a non-negative integer")
        return value
    raise AssertionError(f"no reader for {key} ({setting.kind}): give it one in _SPECIAL")


def _read_triton(value: Any, ctx: _Ctx, root: Path) -> tuple[TritonEntry, ...]:
    entries = ctx.table_list(value, "triton")
    return tuple(parse_triton_entry(entry, f"{ctx.where}: {ctx.key(f'triton[{i}]')}")
                 for i, entry in enumerate(entries))


def _read_cute(value: Any, ctx: _Ctx, root: Path) -> tuple[CuteEntry, ...]:
    return tuple(parse_cute_entry(entry, f"{ctx.where}: {ctx.key(f'cute[{i}]')}")
                 for i, entry in enumerate(ctx.table_list(value, "cute")))


def parse_cute_entry(data: dict[str, Any], where: str, source: str = "registered") -> CuteEntry:
    """Validate one CuTe DSL registration (a config table, `kgate.register` keyword arguments, a capture's table)."""
    from kgate.core import cute

    return cute.parse_entry(data, where, kinds=KINDS, targets=KNOWN_TARGETS, expectations=EXPECTATIONS,
                            source=source)


def _read_cuda(value: Any, ctx: _Ctx, root: Path) -> tuple[CudaEntry, ...]:
    return tuple(parse_cuda_entry(entry, ctx, i) for i, entry in enumerate(ctx.table_list(value, "cuda")))


def _read_per_file_ignores(value: Any, ctx: _Ctx, root: Path) -> dict[str, tuple[str, ...]]:
    pfi = ctx.table(value, "per-file-ignores")
    return {pattern: tuple(ctx.str_list(codes, f"per-file-ignores.{pattern}")) for pattern, codes in pfi.items()}


def _read_severity(value: Any, ctx: _Ctx, root: Path) -> dict[str, str]:
    sev = ctx.table(value, "severity")
    for code, level in sev.items():
        if level not in SEVERITIES:
            raise ctx.error(f"severity.{code}", f"must be one of {', '.join(SEVERITIES)}, not {level!r}")
    return dict(sev)


def _read_options(value: Any, ctx: _Ctx, root: Path) -> dict[str, dict[str, Any]]:
    # Rule names and each rule's options are checked against the registry (`kgate.core.selection`).
    options = ctx.table(value, "options")
    return {name: dict(ctx.table(item, f"options.{name}")) for name, item in options.items()}


def _read_setup(value: Any, ctx: _Ctx, root: Path) -> str:
    setup = ctx.string(value, "setup")
    module, _, function = setup.partition(":")
    is_module = all(part.isidentifier() for part in module.split(".")) and (not function or function.isidentifier())
    if not setup.endswith(".py") and not is_module:
        raise ctx.error("setup", f"must be \"package.module:function\" or a Python file, not {setup!r}")
    if setup.endswith(".py") and not (root / setup).is_file():
        # Otherwise every compile worker fails on it, and each kernel becomes a compile error.
        raise ctx.error("setup", f"{setup!r} is not a file (relative to the project folder)")
    return setup


def _read_timeout(value: Any, ctx: _Ctx, root: Path) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= MAX_TIMEOUT:
        raise ctx.error("timeout", f"must be a positive number of seconds, at most {MAX_TIMEOUT} (a day), "
                                   f"not {value!r}")
    return float(value)


# The keys read by more than their type; every other key of the schema is read by `read_plain`.
_SPECIAL: dict[str, Callable[[Any, _Ctx, Path], Any]] = {
    "triton": _read_triton, "cute": _read_cute, "cuda": _read_cuda, "per-file-ignores": _read_per_file_ignores,
    "severity": _read_severity, "options": _read_options, "setup": _read_setup, "timeout": _read_timeout,
}


def outside_paths(kwargs: dict[str, Any], root: Path, ctx: _Ctx, source: Path | None = None) -> tuple[str, ...]:
    """The policy for configured paths that lead out of the project folder (symlinks followed).

    What kgate writes in place of a file (the baseline) and what it gates (CUDA sources) must be in the
    project; the cache may be anywhere but the project folder itself or a parent of it (kgate puts a
    `.gitignore` of `*` in it); folders it only reads from (python-path, compile_commands) may be
    elsewhere, and each such path is named in a notice.
    """
    project = root.resolve()
    notices = []
    written: dict[Path, str] = {}
    for key, attr, writer in (("baseline", "baseline", "kgate baseline update"), ("capture", "capture", "kgate capture")):
        # The default names too: a kgate-baseline.toml that is a symlink is written through to its target.
        name = kwargs.get(attr, getattr(Config, attr))
        where = (project / name).resolve()
        if not name.strip() or where == project:
            raise ctx.error(key, "must name a file in the project")
        if not where.is_relative_to(project):
            raise ctx.error(key, f"{name!r} is outside the project ({where}): `{writer}` rewrites it, so it must be "
                                 f"in the project")
        if source is not None and where == source.resolve():
            raise ctx.error(key, f"{name!r} is the configuration file: `{writer}` would rewrite it")
        if where in written:
            raise ctx.error(key, f"{name!r} is also the {written[where]} file: `{writer}` would rewrite the "
                                 f"{written[where]}")
        written[where] = key
    if "cache_dir" in kwargs:
        cache = kwargs["cache_dir"]
        where = (project / cache).resolve()
        if project.is_relative_to(where):
            raise ctx.error("cache-dir", f"{cache!r} is the project folder or a parent of it: the cache needs a "
                                         f"folder of its own (kgate marks it ignored with a .gitignore of `*`)")
        if not where.is_relative_to(project):
            notices.append(f"{ctx.where}: {ctx.key('cache-dir')} {cache!r} is outside the project: {where}")
    for folder in kwargs.get("python_path", ()):
        where = (project / folder).resolve()
        if not where.is_relative_to(project):
            notices.append(f"{ctx.where}: {ctx.key('python-path')} {folder!r} is outside the project: kernel "
                           f"modules there are imported from {where}")
    for index, entry in enumerate(kwargs.get("cuda", ())):
        if entry.compile_commands is not None:
            where = (project / entry.compile_commands).resolve()
            if not where.is_relative_to(project):
                notices.append(f"{ctx.where}: {ctx.key(f'cuda[{index}].compile_commands')} "
                               f"{entry.compile_commands!r} is outside the project: flags are read from {where}")
    return tuple(notices)


_TRITON_KEYS = schema.keys(schema.TRITON)
_VARIANT_OPTION_KEYS = {"num_warps", "num_stages"}


def parse_triton_entry(data: dict[str, Any], where: str) -> TritonEntry:
    """Validate one Triton registration (a config table or `kgate.register` keyword arguments)."""
    ctx = _Ctx(where, "")
    ctx.no_unknown(data, _TRITON_KEYS, "")
    if "kernel" not in data:
        raise ctx.error("kernel", "is required (\"package.module:function\")")
    kernel = ctx.string(data["kernel"], "kernel")
    module, _, function = kernel.partition(":")
    if not module or not function or not all(part.isidentifier() for part in module.split(".")) \
            or not function.isidentifier():
        raise ctx.error("kernel", f"must look like \"package.module:function\", not {kernel!r}")
    if "signature" not in data and "args" not in data:
        raise ctx.error("signature", "is required unless `args` gives example values of the run-time arguments "
                                     "(argument name -> Triton type string, e.g. \"*fp16\")")
    signature = ctx.table(data.get("signature", {}), "signature")
    for name, type_ in signature.items():
        if not isinstance(type_, str) or not type_:
            raise ctx.error(f"signature.{name}", "must be a Triton type string such as \"*fp16\" or \"i32\"")
    constexprs = {name: constexpr_value(value, ctx, f"constexprs.{name}")
                  for name, value in ctx.table(data.get("constexprs", {}), "constexprs").items()}
    args = tuple(parse_args(data["args"], ctx)) if "args" in data else ()
    expect = None
    if "expect" in data:
        expect = tuple(ctx.str_list(data["expect"], "expect"))
        for item in expect:
            if item not in EXPECTATIONS:
                raise ctx.error("expect", f"unknown expectation {item!r} (known: {', '.join(EXPECTATIONS)})")
    variants = []
    for i, variant in enumerate(ctx.table_list(data.get("variants", []), "variants")):
        variants.append({key: launch_option(value, ctx, f"variants[{i}].{key}") if key in _VARIANT_OPTION_KEYS
                         else constexpr_value(value, ctx, f"variants[{i}].{key}") for key, value in variant.items()})
    shapes = [audit_shape(shape, ctx, f"shapes[{i}]")
              for i, shape in enumerate(ctx.table_list(data.get("shapes", []), "shapes"))]
    divisible = None
    if "divisible" in data:
        divisible = tuple(ctx.str_list(data["divisible"], "divisible"))
        unknown = [name for name in divisible if name not in signature and not any(name in a for a in args)]
        if unknown:
            raise ctx.error("divisible", f"names arguments not in the signature: {', '.join(unknown)}")
    return TritonEntry(
        kernel=kernel,
        signature=dict(signature),
        constexprs=constexprs,
        num_warps=launch_option(data.get("num_warps", 4), ctx, "num_warps"),
        num_stages=launch_option(data.get("num_stages", 3), ctx, "num_stages"),
        expect=expect,
        pdl=ctx.boolean(data.get("pdl", False), "pdl"),
        kind=ctx.choice(data.get("kind", "other"), "kind", KINDS),
        variants=tuple(variants),
        shapes=tuple(shapes),
        divisible=divisible,
        args=args,
        targets=ctx.targets(data["targets"], "targets") if "targets" in data else None,
        origin=where,
    )


def launch_option(value: Any, ctx: _Ctx, key: str) -> int:
    """`num_warps` or `num_stages`: a positive integer; warps at most what a CTA can hold."""
    number = ctx.positive_int(value, key)
    if key.rpartition(".")[2] == "num_warps" and number > MAX_WARPS:
        raise ctx.error(key, f"must be at most {MAX_WARPS} (a CTA holds at most 1024 threads), not {number}")
    return number


def audit_shape(value: dict[str, Any], ctx: _Ctx, key: str) -> dict[str, int]:
    """One problem shape for the audit: known keys only, at least one, each a positive 64-bit integer (the
    audit divides them as floats)."""
    if not value:
        raise ctx.error(key, f"is empty: a shape declares some of {', '.join(SHAPE_KEYS)}")
    for name, number in value.items():
        if name not in SHAPE_KEYS:
            raise ctx.error(f"{key}.{name}", f"unknown key (a shape takes {', '.join(SHAPE_KEYS)})"
                                             f"{did_you_mean(name, set(SHAPE_KEYS), 0.5)}")
        if ctx.positive_int(number, f"{key}.{name}") > MAX_INT64:
            raise ctx.error(f"{key}.{name}", f"must be at most {MAX_INT64} (a 64-bit integer), not a number of "
                                             f"{len(str(number))} digits")
    return dict(value)


def constexpr_value(value: Any, ctx: _Ctx, key: str) -> Any:
    """A constexpr as kgate's files hold it: a number, boolean or string, a dtype as "tl.bfloat16", None as
    "None", or a list of these (a tuple constexpr). A decorator read at import time passes the objects."""
    if value is None:
        return "None"
    if type(value).__name__ == "dtype" or type(value).__name__ == "constexpr":
        from kgate.core.constexpr import Unsupported, encode_constant

        try:
            return encode_constant(value)
        except Unsupported as exc:
            raise ctx.error(key, f"kgate cannot hold {exc}") from None
    if isinstance(value, (list, tuple)):
        return [constexpr_value(v, ctx, key) for v in value]
    if isinstance(value, str) and value.startswith("tl.") and not value[3:].isidentifier():
        raise ctx.error(key, f"{value!r} is not a dtype name such as \"tl.bfloat16\"")
    if not isinstance(value, (int, float, bool, str)):
        raise ctx.error(key, "must be a number, boolean, string, dtype (\"tl.bfloat16\") or None (\"None\")")
    if isinstance(value, int) and not isinstance(value, bool) and not -MAX_INT64 - 1 <= value <= MAX_INT64:
        raise ctx.error(key, f"{value} is beyond 64 bits (kgate's files are TOML, whose integers are 64-bit)")
    return value


def parse_args(value: Any, ctx: _Ctx) -> list[dict[str, Any]]:
    """`args`: one table, or a list of tables, of example values for the run-time arguments.

    A value is an integer, a float, a boolean, None ("None"), or for a pointer its type ("*bf16") or a
    table `{ type = "*bf16", align = 8 }` (the address's alignment in bytes; default 16, as torch
    allocates). Triton's launcher makes the specialisation from them in the compile worker.
    """
    tables = [value] if isinstance(value, dict) else value
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ctx.error("args", "must be a table, or a non-empty array of tables, of example argument values")
    out = []
    for index, table in enumerate(tables):
        where = "args" if isinstance(value, dict) else f"args[{index}]"
        parsed: dict[str, Any] = {}
        for name, item in table.items():
            parsed[name] = _arg_value(item, ctx, f"{where}.{name}")
        out.append(parsed)
    return out


def _arg_value(item: Any, ctx: _Ctx, key: str) -> Any:
    if item is None or item == "None":
        return "None"
    if isinstance(item, (bool, int, float)):
        if isinstance(item, float) and not math.isfinite(item):
            raise ctx.error(key, f"must be a finite number, not {item!r}")
        return item
    if isinstance(item, str):
        if not item.startswith("*") or len(item) < 2:
            raise ctx.error(key, f"{item!r}: a pointer is given by its type (\"*bf16\"); other values are numbers, "
                                 f"booleans or \"None\"")
        return {"type": item, "align": 16}
    if isinstance(item, dict):
        unknown = sorted(set(item) - {"type", "align"})
        if unknown:
            raise ctx.error(f"{key}.{unknown[0]}", "unknown key (a pointer takes `type` and `align`)")
        ty = item.get("type")
        if not isinstance(ty, str) or not ty.startswith("*") or len(ty) < 2:
            raise ctx.error(f"{key}.type", "must be a pointer type such as \"*bf16\"")
        align = item.get("align", 16)
        if not isinstance(align, int) or isinstance(align, bool) or align <= 0 or align & (align - 1):
            raise ctx.error(f"{key}.align", f"must be a power of two (bytes), not {align!r}")
        return {"type": ty, "align": align}
    raise ctx.error(key, "must be a number, boolean, \"None\", a pointer type (\"*bf16\") or "
                         "{ type = \"*bf16\", align = N }")


_CUDA_KEYS = schema.keys(schema.CUDA)


def parse_cuda_entry(data: Any, parent: _Ctx, index: int) -> CudaEntry:
    ctx = _Ctx(parent.where, parent.key(f"cuda[{index}]"))
    table = ctx.table(data, "")
    ctx.no_unknown(table, _CUDA_KEYS, "")
    if "sources" not in table:
        raise ctx.error("sources", "is required (glob patterns of .cu files)")
    expect = {}
    for pattern, items in ctx.table(table.get("expect", {}), "expect").items():
        values = tuple(ctx.str_list(items, f"expect.{pattern}"))
        for item in values:
            if item not in EXPECTATIONS:
                raise ctx.error(f"expect.{pattern}", f"unknown expectation {item!r} (known: {', '.join(EXPECTATIONS)})")
        expect[pattern] = values
    kinds = {}
    for pattern, kind in ctx.table(table.get("kind", {}), "kind").items():
        kinds[pattern] = ctx.choice(kind, f"kind.{pattern}", KINDS)
    sources = tuple(ctx.str_list(table["sources"], "sources"))
    for pattern in sources:
        if not pattern.strip():
            raise ctx.error("sources", "holds an empty pattern")
        normal = os.path.normpath(pattern)
        if os.path.isabs(pattern) or normal == ".." or normal.startswith("../"):
            raise ctx.error("sources", f"{pattern!r} leads out of the project: patterns are relative to the "
                                       f"project folder, and kgate gates the project's own kernels")
    return CudaEntry(
        sources=sources,
        flags=tuple(ctx.str_list(table.get("flags", []), "flags")),
        compile_commands=ctx.string(table["compile_commands"], "compile_commands") if "compile_commands" in table else None,
        pdl=tuple(ctx.str_list(table.get("pdl", []), "pdl")),
        expect=expect,
        launch_wrappers=tuple(ctx.str_list(table.get("launch_wrappers", []), "launch_wrappers")),
        kind=kinds,
        compiler=ctx.choice(table.get("compiler", "auto"), "compiler", CUDA_COMPILERS),
        targets=ctx.targets(table["targets"], "targets") if "targets" in table else None,
        torch=_torch_mode(table.get("torch", "auto"), ctx),
        origin=f"{parent.where}: {ctx.prefix}",
    )


def _torch_mode(value: Any, ctx: _Ctx) -> bool | str:
    if isinstance(value, bool) or value == "auto":
        return value
    raise ctx.error("torch", f"must be \"auto\", true or false, not {value!r}")


def _rel(path: Path | None, root: Path) -> str:
    if path is None:
        return ""
    try:
        return str(path.relative_to(root.resolve())) if path.is_absolute() else str(path)
    except ValueError:
        return str(path)


class _Ctx:
    """Typed accessors that raise ConfigError naming the file and the dotted key."""

    def __init__(self, where: str, prefix: str) -> None:
        self.where = where
        self.prefix = prefix

    def key(self, key: str) -> str:
        if not key:
            return self.prefix
        return f"{self.prefix}.{key}" if self.prefix else key

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.where}: {self.key(key)}: {message}")

    def no_unknown(self, table: dict[str, Any], known: set[str], key: str) -> None:
        unknown = sorted(set(table) - known)
        if unknown:
            name = unknown[0]
            raise self.error(f"{key}.{name}" if key else name, f"unknown key{did_you_mean(name, known, 0.75)}")

    def table(self, value: Any, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(key, f"must be a table, not {_type_name(value)}")
        return value

    def table_list(self, value: Any, key: str) -> list[dict[str, Any]]:
        if isinstance(value, dict):  # `[cuda]` written for `[[cuda]]`
            raise self.error(key, f"must be an array of tables: write [[{self.key(key)}]], one table each, not "
                                  f"[{self.key(key)}]")
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.error(key, f"must be an array of tables ([[{self.key(key)}]]), not {_type_name(value)}")
        return value

    def str_list(self, value: Any, key: str) -> list[str]:
        if not isinstance(value, list):
            raise self.error(key, f"must be a list of strings, not {_type_name(value)}")
        bad = [v for v in value if not isinstance(v, str)]
        if bad:
            raise self.error(key, f"must be a list of strings, not a list holding {_type_name(bad[0])} {bad[0]!r}")
        for item in value:
            self.no_null(item, key)
        return value

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, not {_type_name(value)}")
        return self.no_null(value, key)

    def no_null(self, value: str, key: str) -> str:
        """TOML strings may hold U+0000; no path, glob, flag or name can (the OS refuses it in a path)."""
        if "\x00" in value:
            raise self.error(key, f"{value!r} holds a null character")
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, not {_type_name(value)}")
        return value

    def positive_int(self, value: Any, key: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise self.error(key, f"must be a positive integer, not {value!r}")
        return value

    def targets(self, value: Any, key: str) -> tuple[str, ...]:
        targets = self.str_list(value, key)
        for target in targets:
            if target not in KNOWN_TARGETS:
                raise self.error(key, f"unknown target {target!r} (known: {', '.join(KNOWN_TARGETS)})")
        if not targets:
            raise self.error(key, "must name at least one target")
        return tuple(dict.fromkeys(targets))

    def choice(self, value: Any, key: str, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.error(key, f"must be one of {', '.join(repr(c) for c in choices)}, not {value!r}")
        return value


def _type_name(value: Any) -> str:
    return {dict: "a table", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
            float: "a float"}.get(type(value), type(value).__name__)

