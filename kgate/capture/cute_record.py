"""Inside a captured process that imports the CuTe DSL: record every `cute.compile` call as the call a
`[[tool.kgate.cute]]` registration describes (`kgate.core.cute`).

A CuTe DSL kernel is specialised by `cute.compile`'s arguments, so the record of a call is those arguments in the
form kgate's files hold them: a tensor's element type, shape, stride (a `cute.sym_int()` dimension as a symbol,
named where the call uses it in more than one place), assumed alignment; a dtype, a stream, None, a scalar; the
constructor arguments of a class kernel. What has no such form is a problem record naming why, never a call
recorded as something else.

Loaded by file path with the recorder (`kgate.capture.runtime`), standard library only: the DSL is reached through
the module the command itself imported, and hooked only once it has.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

DTYPE_PREFIX = "cutlass."
RESERVED = ("None", "stream", "stream:env")  # strings that mean something else in kgate's files
COMPILE_CONTROLS = ("options",)  # cute.compile's own keywords that kgate records (beside the call's arguments)
_MAX_INT64 = 2**63 - 1


def core(name: str) -> Any:
    """A standard-library module of `kgate.core` (`cute_dsl`), loaded as this module is: by file path, once, in a
    captured process, where kgate itself may not be importable."""
    if __package__ == "kgate.capture":
        return importlib.import_module(f"kgate.core.{name}")
    loaded = sys.modules.get(f"_kgate_{name}")
    if loaded is None:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "core", f"{name}.py")
        spec = importlib.util.spec_from_file_location(f"_kgate_{name}", path)
        assert spec is not None and spec.loader is not None
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        sys.modules[f"_kgate_{name}"] = loaded
    return loaded


class Unsupported(Exception):
    """A `cute.compile` call whose arguments have no form in kgate's files."""


def install(module: Any, record: Callable[[dict[str, Any]], str | None],
            measure: Callable[[str, Any], None] | None = None, offline: bool = False) -> None:
    """Wrap the DSL's compile (`cutlass.cute.compile`, and the callables `cute.compile[options]` makes): each
    outermost call is recorded (`record`, which names the record), then compiled as it would be; with `measure`
    (`kgate capture --verify`), the object the compile returned is handed to it with the record's name. `offline`
    (a capture without a GPU): the compiled function is returned as one whose calls launch nothing (`Unlaunched`),
    as an offline capture's Triton launches do, so that the project's op goes on to its next shape where calling
    the real one would fail on CPU tensors (a TVM-FFI function refuses them)."""
    cls: Any = type(getattr(module, "compile", None))  # the DSL's compile object: its class is patched in place
    original_call, original_item = cls.__dict__.get("__call__"), cls.__dict__.get("__getitem__")
    if original_call is None or getattr(original_call, "__kgate__", False):
        return
    depth = threading.local()

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        rid = None
        outermost = getattr(depth, "n", 0) == 0
        if outermost:
            with contextlib.suppress(Exception):  # a recorder must never break the command it watches
                rid = record(call_record(args, kwargs, self.__dict__.get("_kgate_options")))
        depth.n = getattr(depth, "n", 0) + 1
        try:
            compiled = original_call(self, *args, **kwargs)
        finally:
            depth.n -= 1
        if outermost and measure is not None and rid is not None:
            with contextlib.suppress(Exception):
                measure(rid, compiled)
        return Unlaunched(compiled) if offline and outermost else compiled

    call = _dsl_frame(call, cls.__module__)
    call.__kgate__ = True  # type: ignore[attr-defined]
    cls.__call__ = call
    if original_item is not None:
        def item(self: Any, options: Any) -> Any:
            made = original_item(self, options)
            with contextlib.suppress(Exception):  # the options then go unnoticed: it compiles as it would
                made.__dict__["_kgate_options"] = options
            return made

        cls.__getitem__ = item


class Unlaunched:
    """A compiled CuTe DSL function, offline: calling it launches nothing (there is no GPU to launch on) and returns
    None, as do the executors `.to(device)` binds it to (binding loads its modules on a device); anything else is the
    compiled object's own: its attributes, its class to `isinstance`, and a copy of it (another Unlaunched)."""

    def __init__(self, compiled: Any) -> None:
        self.__dict__["_kgate_compiled"] = compiled

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return None

    def to(self, device: Any = None) -> Unlaunched:
        return self

    def run_compiled_program(self, *args: Any, **kwargs: Any) -> None:
        return None

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # `isinstance(f, JitCompiledFunction)` holds as it does online
        return type(self.__dict__["_kgate_compiled"])

    def __reduce__(self) -> tuple[Any, ...]:
        return Unlaunched, (self.__dict__["_kgate_compiled"],)

    def __getattr__(self, name: str) -> Any:
        try:
            compiled = self.__dict__["_kgate_compiled"]
        except KeyError:  # a copy being made, before its state is in
            raise AttributeError(name) from None
        return getattr(compiled, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.__dict__["_kgate_compiled"], name, value)


def _dsl_frame(fn: Any, module: str) -> Any:
    """`fn` as a function of the DSL's module `module`: the DSL points its diagnostics at the first frame of the
    stack outside its own modules (by the frame's module name), which must stay the project's `cute.compile` line,
    not this wrapper's."""
    names = {**fn.__globals__, "__name__": module}
    made = types.FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__, fn.__closure__)
    made.__qualname__ = fn.__qualname__
    return made


def call_record(args: tuple[Any, ...], kwargs: dict[str, Any], options: Any) -> dict[str, Any]:
    """The record of one `cute.compile(fn, *args, **kwargs)`: its kernel and call, or its kernel and a problem."""
    fn = args[0] if args else kwargs.get("fn")
    kernel, file = kernel_name(fn)
    try:
        call = describe(fn, args[1:], kwargs, options)
    except Unsupported as exc:
        return {"kernel": kernel, "problem": str(exc)}
    except Exception as exc:  # noqa: BLE001 - whatever the arguments hold, the call is named, not lost
        return {"kernel": kernel, "problem": f"kgate could not read this cute.compile call: {type(exc).__name__}: {exc}"}
    return {"kernel": kernel, "file": file, "call": call}


def kernel_name(fn: Any) -> tuple[str, str]:
    """`module:name` of what is compiled (a `@cute.jit` function, or the class of an object whose `__call__` is one)
    and the file that defines it."""
    if inspect.isfunction(inspect.unwrap(fn)) if callable(fn) else False:
        raw = inspect.unwrap(fn)
        module = getattr(fn, "__module__", None) or raw.__module__
        names = getattr(sys.modules.get(module), "__dict__", {})
        own = raw.__qualname__
        held = own if names.get(own) is fn else next((n for n, v in list(names.items()) if v is fn), own)
        return f"{module}:{held}", raw.__code__.co_filename
    cls = type(fn)
    code = getattr(inspect.unwrap(_class_call(cls) or (lambda: None)), "__code__", None)
    return f"{cls.__module__}:{cls.__qualname__}", code.co_filename if code is not None else ""


def _class_call(cls: type) -> Any:
    """The `__call__` a class defines or inherits (not the class's own type's)."""
    return next((c.__dict__["__call__"] for c in cls.__mro__ if "__call__" in c.__dict__), None)


def _jit_function(fn: Any) -> tuple[Any, bool]:
    """The `@cute.jit` function a call compiles, and whether `fn` is an object whose `__call__` it is."""
    if core("cute_dsl").decorator_kind(fn) == "jit":
        return fn, False
    method = _class_call(type(fn))
    if not inspect.isfunction(fn) and core("cute_dsl").decorator_kind(method) == "jit":
        return method, True
    raise Unsupported("what is compiled is neither a @cute.jit function nor an object whose __call__ is one")


def describe(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: Any) -> dict[str, Any]:
    """The call as kgate's files hold it: `args` by parameter name, `init`, `options`."""
    if options is not None:
        raise Unsupported("compile options given as cute.compile[...] objects (kgate records an options string: "
                          "cute.compile(..., options=\"...\"))")
    jit, bound = _jit_function(fn)
    params = [p for p in inspect.signature(inspect.unwrap(jit)).parameters.values()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)][1 if bound else 0:]
    if len(args) > len(params):
        raise Unsupported(f"{len(args)} positional arguments for {len(params)} parameters")
    given = {p.name: value for p, value in zip(params, args)}
    option = kwargs.get("options", "")
    for name, value in kwargs.items():
        if name in COMPILE_CONTROLS:
            continue
        if name not in {p.name for p in params}:
            raise Unsupported(f"cute.compile's keyword {name!r} is neither an argument of the jit function nor "
                              f"one kgate records ({', '.join(COMPILE_CONTROLS)})")
        given[name] = value
    if not isinstance(option, str):
        raise Unsupported(f"options is {type(option).__name__}, not a string")
    symbols = _Symbols(list(given.values()))
    out: dict[str, Any] = {"args": {name: encode(value, symbols, f"argument {name!r}") for name, value in given.items()}}
    if bound:
        out["init"] = constructor_args(fn)
    if option:
        out["options"] = option
    return out


def constructor_args(obj: Any) -> dict[str, Any]:
    """A class kernel's constructor arguments, read back from the attributes of the same names, and checked: an
    object built again from them must hold what `obj` holds, or the arguments are not what made it. A parameter with
    a default whose attribute is missing or has no form in kgate's files (a config object the constructor derives
    from None) is left to its default, which the check then answers for."""
    cls = type(obj)
    params = [p for p in inspect.signature(cls.__init__).parameters.values()][1:]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        raise Unsupported(f"{cls.__qualname__}.__init__ takes *args or **kwargs: its arguments cannot be read back")
    given: dict[str, Any] = {}
    init: dict[str, Any] = {}
    for param in params:
        try:
            if not hasattr(obj, param.name):
                raise Unsupported(f"{cls.__qualname__} keeps no attribute {param.name!r} of its constructor's "
                                  f"argument: the arguments it was built with cannot be read back")
            value = getattr(obj, param.name)
            init[param.name] = encode(value, _Symbols([]), f"constructor argument {param.name!r}", tensors=False)
            given[param.name] = value
        except Unsupported:
            if param.default is param.empty:
                raise
    if _state(cls(**given)) != _state(obj):
        raise Unsupported(f"{cls.__qualname__} built again from its attributes {', '.join(given) or '(none)'} is not "
                          f"the object compiled: its constructor arguments cannot be read back")
    return init


def _state(obj: Any) -> dict[str, str]:
    return {name: repr(value) for name, value in sorted(vars(obj).items())}


class _Symbols:
    """Names of the call's symbolic dimensions: a symbol used in more than one place is named (`?s0`), so the
    offline compile makes one symbol for all of them, as the project's call did."""

    def __init__(self, values: list[Any]) -> None:
        seen: dict[int, int] = {}
        for value in values:
            for dim in _dims(value):
                if _is_symbol(dim):
                    seen[id(dim)] = seen.get(id(dim), 0) + 1
        self.names = {key: f"s{i}" for i, key in enumerate(k for k, n in seen.items() if n > 1)}

    def text(self, dim: Any) -> str:
        divisibility = int(getattr(dim, "divisibility", 1) or 1)
        return f"?{self.names.get(id(dim), '')}" + (f":{divisibility}" if divisibility > 1 else "")


def _dims(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [d for item in value for d in _dims(item)]
    if _is_tensor(value):
        return [*value.shape, *value.stride]
    return []


def _is_symbol(value: Any) -> bool:
    return type(value).__name__ == "SymInt" and hasattr(value, "divisibility")


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "element_type") and hasattr(value, "dynamic_shapes_mask") and hasattr(value, "stride")


def encode(value: Any, symbols: _Symbols, what: str, *, tensors: bool = True) -> Any:
    """One argument as kgate's files hold it; Unsupported naming `what` where it has no such form."""
    if value is None:
        return "None"
    if isinstance(value, (bool, float)):
        return value
    if isinstance(value, int):
        if not -_MAX_INT64 - 1 <= value <= _MAX_INT64:
            raise Unsupported(f"{what} is {value}, beyond 64 bits")
        return value
    if isinstance(value, str):
        if value in RESERVED or value.startswith(DTYPE_PREFIX):
            raise Unsupported(f"{what} is the string {value!r}, which kgate's files read as something else")
        return value
    if isinstance(value, (list, tuple)):
        return [encode(item, symbols, what, tensors=tensors) for item in value]
    dtype = _dtype_name(value)
    if dtype is not None:
        return dtype
    scalar = _dtype_name(type(value))  # a DSL scalar, `cutlass.Float32(0.0)`: its type and its value
    if scalar is not None and isinstance(getattr(value, "value", None), (bool, int, float)):
        return encode_scalar(scalar, value.value, what)
    if type(value).__name__ == "_FakeStream":
        return "stream:env" if getattr(value, "use_tvm_ffi_env_stream", False) else "stream"
    if _is_tensor(value):
        if not tensors:
            raise Unsupported(f"{what} is a tensor: a constructor argument cannot be one")
        return tensor(value, symbols, what)
    raise Unsupported(f"{what} is a {type(value).__module__}.{type(value).__qualname__}, which kgate cannot write as "
                      f"a registration's argument (a fake tensor, a dtype, a DSL scalar, a stream, None, a number, "
                      f"a string)")


def encode_scalar(dtype: str, number: float, what: str) -> dict[str, Any]:
    if isinstance(number, int) and not isinstance(number, bool) and not -_MAX_INT64 - 1 <= number <= _MAX_INT64:
        raise Unsupported(f"{what} is {dtype}({number}), beyond 64 bits")
    return {"dtype": dtype, "value": number}


def _dtype_name(value: Any) -> str | None:
    cutlass = sys.modules.get("cutlass")
    name = getattr(value, "__name__", None)
    if isinstance(value, type) and isinstance(name, str) and getattr(cutlass, name, None) is value:
        return DTYPE_PREFIX + name
    return None


def tensor(value: Any, symbols: _Symbols, what: str) -> dict[str, Any]:
    """A fake tensor (or a static `from_dlpack` one) as a tensor table: dtype, shape, stride, align."""
    if getattr(value, "_use_32bit_stride", False):
        raise Unsupported(f"{what} is a tensor with 32-bit strides (use_32bit_stride), which kgate cannot write")
    if "gmem" not in str(value.memspace) and "generic" not in str(value.memspace):
        raise Unsupported(f"{what} is a tensor in {value.memspace}, not global memory")
    fake = type(value).__name__ == "_FakeTensor"
    if not fake and (any(value.dynamic_shapes_mask) or any(value.dynamic_strides_mask)):
        raise Unsupported(f"{what} is a from_dlpack tensor marked dynamic, whose symbols' divisibility kgate cannot "
                          f"read (compile with cute.runtime.make_fake_tensor and cute.sym_int instead)")
    dtype = _dtype_name(value.element_type)
    if dtype is None:
        raise Unsupported(f"{what} has the element type {value.element_type!r}, not one of cutlass's")
    out: dict[str, Any] = {"dtype": dtype, "shape": [_dim(d, symbols, 32, what) for d in value.shape],
                           "stride": [_dim(d, symbols, 64, what) for d in value.stride]}
    align = getattr(value, "_assumed_align", None)
    if align is not None and align != max(1, int(getattr(value.element_type, "width", 8)) // 8):
        out["align"] = int(align)  # the element's own size is what no alignment means
    return out


def _dim(dim: Any, symbols: _Symbols, width: int, what: str) -> int | str:
    if isinstance(dim, int) and not isinstance(dim, bool):
        return dim
    if _is_symbol(dim):
        if int(getattr(dim, "width", width)) != width:
            kind = "shape" if width == 32 else "stride"
            raise Unsupported(f"{what} has a {dim.width}-bit symbol in its {kind} (kgate writes {width}-bit ones)")
        return symbols.text(dim)
    raise Unsupported(f"{what} has the dimension {dim!r}, neither an integer nor a cute.sym_int()")
