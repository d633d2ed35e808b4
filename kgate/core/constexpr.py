"""Constexpr values in the form kgate's files hold them (the configuration, `kgate.register`, the capture file).

Read in two kinds of process: kgate's own, and a command `kgate capture` records, which loads this file
by path (`kgate.capture.runtime`), so it imports nothing of kgate and only the standard library at load
time; Triton is imported when a value is encoded.
"""

from __future__ import annotations

from typing import Any


class Unsupported(Exception):
    """A launch kgate cannot describe faithfully: recorded as a problem, never as a wrong entry."""


def _dtype_names() -> dict[str, str]:
    """Triton dtype name ("bf16") -> the attribute of triton.language that holds it ("bfloat16")."""
    import triton.language as tl

    names: dict[str, str] = {}
    for attr in sorted(dir(tl)):
        value = getattr(tl, attr, None)
        if isinstance(value, tl.dtype) and not isinstance(value, tl.pointer_type):
            names.setdefault(value.name, attr)
    return names


_DTYPES: dict[str, str] = {}


def encode_constant(value: Any) -> Any:
    """A constexpr value in the form kgate's files hold: numbers, booleans and strings as they are,
    `None` as "None", a dtype as "tl.<name>", a @jit function as "jit:<module>:<qualname>", tuples as lists."""
    import triton.language as tl

    if value is None:
        return "None"
    if isinstance(value, int) and not isinstance(value, bool) and not -2**63 <= value < 2**63:
        # TOML, which the capture file and the configuration are, holds 64-bit integers.
        raise Unsupported(f"an integer constexpr beyond 64 bits ({value})")
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tl.constexpr):
        return encode_constant(value.value)
    if isinstance(value, tl.dtype):
        if isinstance(value, tl.pointer_type):
            raise Unsupported(f"a pointer-type constexpr ({value})")
        if not _DTYPES:
            _DTYPES.update(_dtype_names())
        attr = _DTYPES.get(value.name)
        if attr is None:
            raise Unsupported(f"a dtype constexpr kgate cannot name ({value})")
        return f"tl.{attr}"
    if isinstance(value, (tuple, list)):
        return [encode_constant(v) for v in value]
    if type(value).__name__ == "JITFunction":
        return f"jit:{value.module}:{value.fn.__qualname__}"
    raise Unsupported(f"a constexpr of type {type(value).__name__}")
