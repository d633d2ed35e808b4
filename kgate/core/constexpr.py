"""Constexpr values in the form kgate's files hold them (the configuration, `kgate.register`, the capture file).

Read in two kinds of process: kgate's own, and a command `kgate capture` records, which loads this file
by path (`kgate.capture.runtime`), so it imports nothing of kgate and only the standard library at load
time; Triton is imported when a value is encoded.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

GLUON = "triton.experimental.gluon"  # Gluon's package: its layouts are frozen dataclasses of its own


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
    `None` as "None", a dtype as "tl.<name>", a @jit function as "jit:<module>:<qualname>", tuples as lists. A
    string written as one of those forms is Unsupported: read back, it would be that value."""
    import triton.language as tl

    if value is None:
        return "None"
    if isinstance(value, int) and not isinstance(value, bool) and not -2**63 <= value < 2**63:
        # TOML, which the capture file and the configuration are, holds 64-bit integers.
        raise Unsupported(f"an integer constexpr beyond 64 bits ({value})")
    if isinstance(value, str) and _read_as_another(value):
        raise Unsupported(f"the string constexpr {value!r}, which kgate's files read as something else")
    if isinstance(value, str) and not _is_text(value):
        raise Unsupported(f"the string constexpr {value!r}, which holds a lone surrogate: no UTF-8 file can hold it")
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
    if type(value).__name__ in ("JITFunction", "GluonJITFunction"):
        return f"jit:{value.module}:{value.fn.__qualname__}"
    if _is_gluon_object(value):
        return gluon_call(value)
    raise Unsupported(f"a constexpr of type {type(value).__name__}")


def _read_as_another(text: str) -> bool:
    """Whether a string is the form kgate's files give another value (`None`, a dtype, a @jit function, a Gluon
    object), so that written as it is it would be read back as that value, never as the string."""
    return text == "None" or text.startswith(("tl.", "jit:")) or (
        text.startswith(("gl.", GLUON + ".")) and text.endswith(")"))


def _is_text(value: str) -> bool:
    """Whether a string is text a UTF-8 file can hold (no lone surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_gluon_object(value: Any) -> bool:
    """A Gluon layout (or another frozen dataclass of Gluon's: a cache policy) passed as a constexpr."""
    return dataclasses.is_dataclass(value) and not isinstance(value, type) \
        and type(value).__module__.startswith(GLUON + ".")


def gluon_call(value: Any) -> str:
    """A Gluon layout as the call that makes it again, every field by name: `gl.BlockedLayout(size_per_thread=[4],
    threads_per_warp=[32], warps_per_cta=[4], order=[0], cga_layout=[])` (a class Gluon's language module does
    not export by its module's path). Read back by `kgate.compile.gluon.gluon_object`."""
    cls = type(value)
    language = sys.modules.get(GLUON + ".language")
    name = f"gl.{cls.__name__}" if getattr(language, cls.__name__, None) is cls else f"{cls.__module__}.{cls.__qualname__}"
    fields = ", ".join(f"{f.name}={_argument(getattr(value, f.name))}" for f in dataclasses.fields(value) if f.init)
    return f"{name}({fields})"


def _argument(value: Any) -> str:
    if _is_gluon_object(value):
        return gluon_call(value)
    if isinstance(value, list):
        return "[" + ", ".join(_argument(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_argument(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    raise Unsupported(f"a Gluon constexpr holding a {type(value).__name__}")
