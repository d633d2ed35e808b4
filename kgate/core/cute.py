"""A CuTe DSL kernel to gate: the `cute.compile` call kgate makes for it, from a registration or a capture.

`cute.compile(fn, *args)` traces a `@cute.jit` function for the arguments it is given and compiles what the trace
makes: the element type, the shape and the stride of each tensor (a dimension is static unless it is a symbol),
its assumed alignment, the value of every `Constexpr` argument, the attributes of the object whose `__call__` is
the jit function. Those arguments are the specialisation, so a registration and a capture say the same thing: the
arguments of one call, as kgate's files hold them (TOML has no tensors, no dtypes, no `None`):

    a tensor        { dtype = "cutlass.BFloat16", shape = ["?", 4096], stride = ["?:8", 1], align = 16 }
    a dimension     an integer (static), or "?" (a symbol: `cute.sym_int()`), "?:8" (one divisible by 8),
                    "?m" or "?m:8" (a named symbol: every place that names `m` is the same value)
    a dtype         "cutlass.BFloat16"
    a DSL scalar    { dtype = "cutlass.Float32", value = 0.0 } (`cutlass.Float32(0.0)`: the type the call gave it)
    a stream        "stream" (`cute.runtime.make_fake_stream()`)
    None            "None"
    anything else   a number, a boolean or a string, as it is

A kernel is `package.module:name`: a `@cute.jit` function, or a class whose `__call__` is one (the pattern of
the QuACK and FlashAttention kernels), built with `init` (its constructor's keyword arguments) for each call.
Standard library only: configuration, capture and compile workers share it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from kgate.core.entry import KernelEntry
from kgate.core.errors import ConfigError
from kgate.core.schema import SHAPE_KEYS

STREAM = "stream"
DTYPE_PREFIX = "cutlass."
TENSOR_KEYS = ("dtype", "shape", "stride", "align")
SCALAR_KEYS = ("dtype", "value")
_DIM = re.compile(r"\?([A-Za-z_][A-Za-z0-9_]*)?(?::([1-9][0-9]*))?")
_MAX_INT64 = 2**63 - 1


@dataclass(frozen=True)
class CuteCall:
    """One `cute.compile` call: what kgate compiles for a CuTe DSL kernel, and names as one variant."""

    kernel: str  # "package.module:name"
    args: dict[str, Any]  # parameter name -> value as kgate's files hold it (passed by name)
    init: dict[str, Any] = field(default_factory=dict)  # constructor arguments of a class kernel
    options: str = ""  # the compile options the call gave, beside those kgate adds (its target, its dumps)

    @property
    def tag(self) -> str:
        """Eight hex digits of the whole call: two calls that compile differently never share a name."""
        blob = json.dumps([self.init, self.args, self.options], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:8]

    @property
    def variant(self) -> str:
        """A readable name: the constructor's and the scalar arguments' values, the tensors' element types, the tag."""
        named = [f"{k}={_short(v)}" for k, v in sorted(self.init.items())]
        args = sorted(self.args.items())
        named += [f"{k}={_short(v)}" for k, v in args if not is_tensor(v) and not str(v).startswith(STREAM)]
        dtypes = "+".join(_short(v["dtype"]) for _k, v in args if is_tensor(v))
        readable = ",".join(part for part in (",".join(named), dtypes) if part)
        return f"{readable}#{self.tag}" if readable else self.tag

    def to_record(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "init": dict(self.init), "args": dict(self.args), "options": self.options}

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> CuteCall:
        return cls(data["kernel"], dict(data["args"]), dict(data.get("init", {})), str(data.get("options", "")))


@dataclass(frozen=True)
class CuteEntry(KernelEntry):
    """One CuTe DSL kernel to gate: a `[[tool.kgate.cute]]` table, a `@kgate.register` on a `@cute.jit` function,
    or a `[[cute]]` table of the capture file (`source = "captured"`)."""

    kernel: str
    args: tuple[dict[str, Any], ...]  # one call each
    init: dict[str, Any] = field(default_factory=dict)
    options: str = ""
    expect: tuple[str, ...] | None = None
    kind: str = "other"
    shapes: tuple[dict[str, int], ...] = ()
    targets: tuple[str, ...] | None = None
    origin: str = ""
    source: str = "registered"  # "registered" | "captured"
    captured: tuple[str, ...] = ()  # the capture environments that made this call

    language = "cute"

    def calls(self) -> list[CuteCall]:
        return [CuteCall(self.kernel, dict(args), dict(self.init), self.options) for args in self.args]

    def to_json(self) -> dict[str, Any]:
        return {"language": "cute", "kernel": self.kernel, "args": [dict(a) for a in self.args],
                "init": dict(self.init), "options": self.options,
                "expect": list(self.expect) if self.expect is not None else None, "kind": self.kind,
                "shapes": list(self.shapes), "targets": list(self.targets) if self.targets is not None else None,
                "source": self.source}


def is_tensor(value: Any) -> bool:
    """Whether an argument as kgate's files hold it is a tensor's table (a scalar's has a `value`)."""
    return isinstance(value, dict) and "value" not in value


def _short(value: Any) -> str:
    if isinstance(value, dict):  # a DSL scalar: its value, as a number argument shows
        return str(value["value"])
    if isinstance(value, str) and value.startswith(DTYPE_PREFIX):
        return value[len(DTYPE_PREFIX):]
    return str(value)


# --------------------------------------------------------------------------- values


def value(raw: Any, where: str, *, tensors: bool = True) -> Any:
    """A call's argument (or a constructor's, `tensors=False`) as kgate's files hold it; ConfigError naming `where`
    for anything else."""
    if raw is None:
        return "None"
    if isinstance(raw, dict) and "value" in raw:
        return scalar(raw, where)
    if isinstance(raw, dict):
        if not tensors:
            raise ConfigError(f"{where}: a constructor argument cannot be a tensor")
        return tensor(raw, where)
    if isinstance(raw, (list, tuple)):
        return [value(item, where, tensors=tensors) for item in raw]
    if isinstance(raw, (bool, float)):
        return raw
    if isinstance(raw, int):
        if not -_MAX_INT64 - 1 <= raw <= _MAX_INT64:
            raise ConfigError(f"{where}: {raw} is beyond 64 bits")
        return raw
    if isinstance(raw, str):
        if raw.startswith(DTYPE_PREFIX) and not raw[len(DTYPE_PREFIX):].isidentifier():
            raise ConfigError(f"{where}: {raw!r} is not a dtype name such as \"cutlass.BFloat16\"")
        return raw
    raise ConfigError(f"{where}: must be a number, boolean, string, dtype (\"cutlass.BFloat16\"), \"stream\", "
                      f"\"None\" or a tensor table, not {type(raw).__name__}")


def scalar(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """A scalar of one of the DSL's types (`cutlass.Float32(0.0)`): `dtype` and `value`, a number or a boolean."""
    unknown = sorted(set(raw) - set(SCALAR_KEYS))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key (a scalar takes {', '.join(SCALAR_KEYS)})")
    dtype, number = raw.get("dtype"), raw["value"]
    if not isinstance(dtype, str) or not dtype.startswith(DTYPE_PREFIX) or not dtype[len(DTYPE_PREFIX):].isidentifier():
        raise ConfigError(f"{where}.dtype: must be a CuTe DSL scalar type such as \"cutlass.Float32\"")
    if not isinstance(number, (bool, int, float)) or isinstance(number, int) and not -_MAX_INT64 - 1 <= number <= _MAX_INT64:
        raise ConfigError(f"{where}.value: must be a number or a boolean (at most 64 bits), not {number!r}")
    return {"dtype": dtype, "value": number}


def tensor(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """A tensor's table: `dtype`, `shape`, `stride` (default: row-major of the shape, static dims only), `align`."""
    unknown = sorted(set(raw) - set(TENSOR_KEYS))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key (a tensor takes {', '.join(TENSOR_KEYS)})")
    dtype = raw.get("dtype")
    if not isinstance(dtype, str) or not dtype.startswith(DTYPE_PREFIX) or not dtype[len(DTYPE_PREFIX):].isidentifier():
        raise ConfigError(f"{where}.dtype: must be a CuTe DSL element type such as \"cutlass.BFloat16\"")
    shape = dims(raw.get("shape"), f"{where}.shape")
    if "stride" in raw:
        stride = dims(raw["stride"], f"{where}.stride")
        if len(stride) != len(shape):
            raise ConfigError(f"{where}.stride: has {len(stride)} dimensions, the shape {len(shape)}")
    else:
        stride = row_major(shape, where)
    out: dict[str, Any] = {"dtype": dtype, "shape": shape, "stride": stride}
    if "align" in raw:
        align = raw["align"]
        if not isinstance(align, int) or isinstance(align, bool) or align <= 0 or align & (align - 1):
            raise ConfigError(f"{where}.align: must be a power of two (bytes), not {align!r}")
        out["align"] = align
    return out


def dims(raw: Any, where: str) -> list[int | str]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}: must be a non-empty array of dimensions (integers, or \"?\" for a symbol)")
    for item in raw:
        if isinstance(item, bool) or not (isinstance(item, int) and 0 <= item <= _MAX_INT64
                                          or isinstance(item, str) and dim_symbol(item) is not None):
            raise ConfigError(f"{where}: {item!r} is not a dimension (an integer, or \"?\", \"?:16\", \"?m\", "
                              f"\"?m:16\" for a symbol)")
    return list(raw)


def dim_symbol(text: str) -> tuple[str, int] | None:
    """(name, divisibility) of a symbolic dimension ("?" has the empty name); None for other text."""
    match = _DIM.fullmatch(text)
    return (match.group(1) or "", int(match.group(2) or 1)) if match else None


def row_major(shape: list[int | str], where: str) -> list[int | str]:
    if not all(isinstance(d, int) for d in shape[1:]):
        raise ConfigError(f"{where}.stride: is required where the shape has a symbol past its first dimension")
    stride: list[int | str] = []
    step = 1
    for size in reversed(shape):
        stride.insert(0, step)
        step *= size if isinstance(size, int) else 1
    return stride


def parse_entry(data: dict[str, Any], where: str, *, kinds: tuple[str, ...], targets: tuple[str, ...],
                expectations: tuple[str, ...], source: str = "registered") -> CuteEntry:
    """Validate one CuTe DSL registration (a `[[cute]]` table, `kgate.register` keywords, a capture's table)."""
    known = {"kernel", "args", "init", "options", "expect", "kind", "shapes", "targets", "captured"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{where}: {unknown[0]}: unknown key (a CuTe DSL kernel takes {', '.join(sorted(known))})")
    kernel = data.get("kernel")
    module, _, name = kernel.partition(":") if isinstance(kernel, str) else ("", "", "")
    if (not isinstance(kernel, str) or not module or not all(p.isidentifier() for p in module.split("."))
            or not name.isidentifier()):
        raise ConfigError(f"{where}: kernel: must look like \"package.module:name\", not {kernel!r}")
    tables = data.get("args")
    tables = [tables] if isinstance(tables, dict) else tables
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{where}: args: is required: a table (or an array of tables, one call each) of the jit "
                          f"function's arguments")
    args = tuple({k: value(v, f"{where}: args.{k}") for k, v in t.items()} for t in tables)
    init = data.get("init", {})
    if not isinstance(init, dict):
        raise ConfigError(f"{where}: init: must be a table of the class's constructor arguments")
    options = data.get("options", "")
    if not isinstance(options, str):
        raise ConfigError(f"{where}: options: must be a string of cute.compile options")
    return CuteEntry(
        kernel=kernel, args=args, init={k: value(v, f"{where}: init.{k}", tensors=False) for k, v in init.items()},
        options=options, expect=_choices(data, "expect", expectations, where), kind=_kind(data, kinds, where),
        shapes=tuple(_shapes(data, where)), targets=_targets(data, targets, where), origin=where, source=source,
        captured=tuple(data.get("captured", ())))


def _choices(data: dict[str, Any], key: str, allowed: tuple[str, ...], where: str) -> tuple[str, ...] | None:
    if key not in data:
        return None
    items = data[key]
    if not isinstance(items, list) or any(item not in allowed for item in items):
        raise ConfigError(f"{where}: {key}: must be a list of {', '.join(allowed)}")
    return tuple(items)


def _kind(data: dict[str, Any], kinds: tuple[str, ...], where: str) -> str:
    kind = data.get("kind", "other")
    if kind not in kinds:
        raise ConfigError(f"{where}: kind: must be one of {', '.join(kinds)}, not {kind!r}")
    return str(kind)


def _targets(data: dict[str, Any], known: tuple[str, ...], where: str) -> tuple[str, ...] | None:
    if "targets" not in data:
        return None
    targets = data["targets"]
    if not isinstance(targets, list) or not targets or any(t not in known for t in targets):
        raise ConfigError(f"{where}: targets: must name some of {', '.join(known)}")
    return tuple(dict.fromkeys(targets))


def _shapes(data: dict[str, Any], where: str) -> list[dict[str, int]]:
    shapes = data.get("shapes", [])
    if not isinstance(shapes, list) or not all(isinstance(s, dict) and s and all(
            k in SHAPE_KEYS and isinstance(v, int) and not isinstance(v, bool) and 0 < v <= _MAX_INT64
            for k, v in s.items()) for s in shapes):
        raise ConfigError(f"{where}: shapes: must be an array of tables of {', '.join(SHAPE_KEYS)}, each a positive "
                          f"integer")
    return [dict(s) for s in shapes]
