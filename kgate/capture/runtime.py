"""Inside a process that launches Triton kernels: record every specialisation Triton's launcher computes.

This module runs in two places:

- in a process started by `kgate capture -- COMMAND` (loaded by `sitecustomize` before the
  command's own code, by file path, so it needs nothing of kgate but itself);
- in kgate's compile workers, where `bind` puts a registration's example arguments through the
  same launcher to learn the specialisation they make.

It takes the specialisation from Triton itself: the launcher (`JITFunction.run`) binds the
arguments with Triton's own binder and specialisation functions, then calls
`knobs.runtime.jit_cache_hook` with the signature, constants, attributes and options it is
about to compile, before compiling anything. The hook records them. On a machine without a GPU
("offline" mode) an `OfflineDriver` stands in for the CUDA driver, so the launcher binds for
the configured target, and the hook answers "skip", so nothing is compiled or launched; the
autotuner's benchmark is replaced by one binding of each config, so every config is recorded.

Only the standard library is imported at load time: Triton is imported by the command itself,
and the hooks are installed the moment it is.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import errno
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import threading
import types
from collections.abc import Callable, Mapping
from typing import Any

RECORD_VERSION = 1
ENV_DIR = "KGATE_CAPTURE_DIR"  # where each process writes records-<pid>-<random>.jsonl
ENV_MODE = "KGATE_CAPTURE_MODE"  # "gpu" (run as usual) or "offline" (bind for a target, launch nothing)
ENV_TARGET = "KGATE_CAPTURE_TARGET"  # offline: the capability to bind for, e.g. "120"
ENV_SETUP = "KGATE_SETUP"  # "module:function" or a file: the project's set-up, run before its code
ENV_SETUP_PATH = "KGATE_SETUP_PATH"  # os.pathsep-separated folders to import the set-up from
ENV_LIVE = "KGATE_CAPTURE_LIVE"  # "1": also write what the driver reports of each kernel the JIT loads
ENV_COUNTS = "KGATE_CAPTURE_COUNTS"  # "1": also count launches
ENV_WHERE = "KGATE_CAPTURE_WHERE"  # offline: how to name this environment in the capture file ("cpu sm_120a")

# Options recorded even at their default value: they name the variant.
ALWAYS_RECORDED = ("num_warps", "num_stages")


# The constexpr values' file form is the shared model's (the configuration reads it too). In a captured command
# this file is loaded by path and kgate itself may not be importable there: that module is loaded by path too.
if __package__ == "kgate.capture":
    from kgate.core import constexpr as _constexpr
else:
    _spec = importlib.util.spec_from_file_location(
        "_kgate_constexpr", os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "core", "constexpr.py"))
    assert _spec is not None and _spec.loader is not None
    _constexpr = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_constexpr)
Unsupported = _constexpr.Unsupported
encode_constant = _constexpr.encode_constant


def _sibling(name: str) -> Any:
    """A module of the CuTe DSL's recorder (`kgate.capture.cute_record`, `cute_live`), loaded as this module is, once,
    when the DSL is imported."""
    if __package__ == "kgate.capture":
        return importlib.import_module(f"kgate.capture.{name}")
    loaded = sys.modules.get(f"_kgate_{name}")
    if loaded is None:
        spec = importlib.util.spec_from_file_location(
            f"_kgate_{name}", os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py"))
        assert spec is not None and spec.loader is not None
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        sys.modules[f"_kgate_{name}"] = loaded
    return loaded


# --------------------------------------------------------------------------- the launcher's output


def _device_cache(jit_function: Any, device: Any) -> tuple[Any, Any, Any]:
    """(kernel cache, target, backend) of a JITFunction for a device, across Triton versions' tuple layouts."""
    entry = jit_function.device_caches[device]
    cache = entry[0]
    target = next(e for e in entry if type(e).__name__ == "GPUTarget")
    backend = next(e for e in entry if hasattr(e, "parse_options"))
    return cache, target, backend


_DEFAULTS: dict[int, dict[str, Any]] = {}


def _default_options(backend: Any) -> dict[str, Any]:
    key = id(backend)
    if key not in _DEFAULTS:
        _DEFAULTS[key] = json.loads(json.dumps(backend.parse_options({}).__dict__, default=str))
    return _DEFAULTS[key]


def specialization_record(jit_function: Any, compile: dict[str, Any], backend: Any) -> dict[str, Any]:
    """What Triton's launcher is about to compile, from `jit_cache_hook`'s arguments, as a plain record.

    Every parameter lands in exactly one place: `signature` (run-time, with Triton's type string),
    `constexprs` (declared `tl.constexpr`), `equal_to_1` or `none` (run-time arguments the launcher
    turned into constants). `divisible` lists what it specialised as divisible by 16. `options` keeps
    the compile options that differ from the target's defaults, plus num_warps and num_stages.
    """
    params = list(jit_function.params)
    names = [p.name for p in params]
    declared = {p.name for p in params if p.is_constexpr}
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    equal_to_1: list[str] = []
    none: list[str] = []
    divisible: list[str] = []
    for name, ty in compile["signature"].items():
        if ty == "constexpr":
            continue
        if not isinstance(ty, str):
            raise Unsupported(f"argument {name!r} is a tuple ({ty})")
        signature[name] = ty
    for path, value in compile["constants"].items():
        path = tuple(path) if isinstance(path, (tuple, list)) else (path,)
        if len(path) != 1 or not isinstance(path[0], int):
            raise Unsupported(f"a constant inside a tuple argument (path {path})")
        name = names[path[0]]
        if name in declared:
            constexprs[name] = encode_constant(value)
        elif value is None:
            none.append(name)
        elif value == 1 and isinstance(value, int) and not isinstance(value, bool):
            equal_to_1.append(name)
        else:
            raise Unsupported(f"run-time argument {name!r} made the constant {value!r}")
    attrs = compile["configs"][0] if compile.get("configs") else {}
    for path, items in attrs.items():
        path = tuple(path) if isinstance(path, (tuple, list)) else (path,)
        for item in items or ():
            if list(item) != ["tt.divisibility", 16]:
                raise Unsupported(f"specialisation attribute {list(item)} (kgate knows tt.divisibility 16)")
            if len(path) != 1:
                raise Unsupported(f"an attribute inside a tuple argument (path {path})")
            divisible.append(names[path[0]])
    launched = json.loads(compile["specialization_data"])["options"]
    defaults = _default_options(backend)
    options = {k: v for k, v in launched.items() if k in ALWAYS_RECORDED or defaults.get(k, v) != v or k not in defaults}
    module, name, file = holder(jit_function)
    return {
        "kernel": f"{module}:{name}",
        "file": file,
        "signature": signature,
        "constexprs": constexprs,
        "divisible": sorted(divisible),
        "equal_to_1": sorted(equal_to_1),
        "none": sorted(none),
        "options": options,
    }


def holder(jit_function: Any) -> tuple[str, str, str]:
    """The module, the name it holds the kernel under and that module's file: what `kgate check` imports the kernel
    by. `kern` for `kern = triton.jit(_impl)`, the autotuned or heuristics-wrapped object's name for a kernel wrapped
    after `jit`; the function's own name where that holds it, or where no module holds it under a name (a kernel made
    in a function: kgate says it cannot import it). A function of one module made a kernel in another (`kern =
    triton.jit(impl.body)`) is held by the module that made it: its own module holds only the plain function."""
    own = jit_function.fn.__qualname__
    home = getattr(jit_function, "module", "")
    file = getattr(jit_function.fn.__code__, "co_filename", "")
    module = sys.modules.get(home)
    names = getattr(module, "__dict__", {})
    if names.get(own) is not None and _ends_in(names[own], jit_function):
        return home, own, file
    held = _held_in(names, lambda value: _ends_in(value, jit_function))
    if held:
        return home, held, file
    # Every other module's names, read without touching what is not a kernel (a library's name may warn or compute
    # when an attribute of it is read): the kernel itself, or a wrapper of Triton's that ends in it.
    kernel_types = tuple(cls for cls in type(jit_function).__mro__ if cls.__name__ == "KernelInterface")
    for name, other in sorted(sys.modules.copy().items(), key=lambda item: item[0]):
        names = vars(other) if isinstance(other, types.ModuleType) and other is not module else {}
        held = _held_in(names, lambda value: value is jit_function or (
            issubclass(type(value), kernel_types) and _ends_in(value, jit_function)))
        if held and isinstance(names.get("__file__"), str):
            return name, held, names["__file__"]
    return home, own, file


def _held_in(names: Mapping[str, Any], launches: Callable[[Any], bool]) -> str | None:
    """The first name (in order) of a module's `names` whose value `launches` the kernel."""
    held = sorted(name for name, value in list(names.items())
                  if isinstance(name, str) and not name.startswith("__") and launches(value))
    return held[0] if held else None


def _ends_in(value: Any, jit_function: Any) -> bool:
    """Whether launching `value` launches `jit_function`: it is, or wraps it through `fn` (autotune, heuristics)."""
    for _ in range(8):
        if value is jit_function:
            return True
        try:
            value = value.__dict__.get("fn") if hasattr(value, "__dict__") else None
        except Exception:  # noqa: BLE001 - a module may hold anything; a recorder must not break the command
            return False
        if value is None:
            return False
    return False


# --------------------------------------------------------------------------- an offline driver


def offline_driver(capability: int) -> Any:
    """A stand-in for Triton's CUDA driver that binds launches for `capability` without a GPU.

    The launcher asks the active driver for the current device, stream and target only; the
    autotuner asks it for a benchmarker, which here binds the config once (through the launcher,
    so it is recorded) and reports every config equally fast.
    """
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase

    class OfflineDriver(DriverBase):
        @classmethod
        def is_active(cls) -> bool:
            return True

        def map_python_to_cpp_type(self, ty: str) -> str:
            return ty

        def get_current_target(self) -> Any:
            return GPUTarget("cuda", capability, 32)

        def get_active_torch_device(self) -> Any:
            torch = sys.modules.get("torch")
            return torch.device("cpu") if torch is not None else None

        def get_benchmarker(self) -> Any:
            return bind_once

        def get_current_device(self) -> int:
            return capability  # one binder per target in a process that binds for several

        def get_current_stream(self, device: Any = None) -> int:
            return 0

        def set_current_device(self, device: Any) -> None:
            pass

        def get_device_capability(self, device: Any = None) -> tuple[int, int]:
            return divmod(capability, 10)

    return OfflineDriver()


def offline_torch() -> None:
    """Offline, `torch.cuda.device(...)` of a CPU tensor's device switches nothing, as `torch.cuda.device_of` of one
    already does.

    Launchers enter `torch.cuda.device(x.device.index)` or `torch.cuda.device(x.device)` around a launch. On the CPU
    tensors an offline capture runs them on, that is `None` or the CPU, which torch refuses ("invalid argument to
    exchangeDevice", "Expected a cuda device") although there is no CUDA device to switch: the launch never happened.
    A CUDA device is still torch's to refuse.
    """
    torch = sys.modules.get("torch")
    cls = getattr(getattr(torch, "cuda", None), "device", None)
    init = getattr(cls, "__init__", None)
    if torch is None or init is None or getattr(init, "__kgate__", False):
        return

    def __init__(self: Any, device: Any) -> None:
        if device is None or _is_cpu(torch, device):
            init(self, -1)  # the index torch itself gives a CPU tensor's device (`device_of`)
        else:
            init(self, device)

    __init__.__kgate__ = True  # type: ignore[attr-defined]
    cls.__init__ = __init__  # type: ignore[misc]


def _is_cpu(torch: Any, device: Any) -> bool:
    try:
        return isinstance(device, (str, torch.device)) and torch.device(device).type == "cpu"
    except (RuntimeError, TypeError, ValueError):
        return False


def bind_once(kernel_call: Any, quantiles: Any = None, **_: Any) -> list[float]:
    """The offline autotuner's benchmark: run the launcher once (it records and launches nothing)."""
    kernel_call()
    return [1.0, 1.0, 1.0] if quantiles else 1.0  # type: ignore[return-value]


# --------------------------------------------------------------------------- recording


class Recorder:
    """Records, per process, every specialisation the launcher computes (appended to a JSONL file as seen,
    so a killed process loses nothing it recorded), problems, and at exit the optional extras."""

    def __init__(self, directory: str, offline: bool, live: bool, counts: bool,
                 sink: Callable[[dict[str, Any]], object] | None = None) -> None:
        self.directory = directory
        self.sink = sink  # where records go instead of the file (binding in a compile worker)
        self.offline = offline
        self.live = live
        self.counts = counts
        self.seen: dict[tuple[int, str], str] = {}  # (id of the JITFunction, Triton's cache key) -> record id
        self.cute_seen: set[str] = set()  # record ids of the cute.compile calls written
        self.cute_measured: set[str] = set()  # ... and of those whose kernels' figures were written (`--verify`)
        self.launches: dict[str, int] = {}
        self.specs: dict[str, dict[str, Any]] = {}  # record id -> record
        self.autotuned: list[list[str]] = []  # record ids bound inside each running autotuner call
        self.lock = threading.Lock()
        self._io = threading.Lock()  # one line at a time into the file, whatever lock the caller holds
        self._pid = -1
        self._fd = -1
        self._path = ""
        self._file: tuple[int, int] | None = None  # (device, inode) of this process's record file
        self._lost = False  # a write failed: this process writes nothing more (kgate is told by a marker)
        self._written = 0  # bytes this process wrote into its file
        self._finished = False
        self.previous_hook: Any = None
        self.previous_post_hook: Any = None
        self.where: str | None = os.environ.get(ENV_WHERE) if offline else None
        self._described = False
        self._env: dict[str, Any] | None = None  # this process's env record, written again by a forked child
        if sink is None and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """In a forked child: locks of its own (another thread of the parent may have held one at the fork, and
        would never release the child's copy) and counts of its own (the parent's are the parent's to write)."""
        self.lock = threading.Lock()
        self._io = threading.Lock()
        self.launches = {}
        self.autotuned = []
        self._lost = False
        self._finished = False
        mp_util = sys.modules.get("multiprocessing.util")
        if self.counts and mp_util is not None:
            # A multiprocessing child ends in os._exit, which runs no atexit handler: its counts are written by
            # a finalizer, registered once multiprocessing has cleared the parent's.
            mp_util.register_after_fork(self, Recorder._finish_with_multiprocessing)

    def _finish_with_multiprocessing(self) -> None:
        import multiprocessing.util

        multiprocessing.util.Finalize(None, self.finish, exitpriority=0)

    def _write(self, record: dict[str, Any]) -> None:
        """Append one record to this process's file, whole. A write that fails (a full disk, a file size limit, a
        folder taken away) never reaches the command: this process stops writing and leaves an empty marker
        file whose name says why, so that kgate reports the records lost instead of passing without them."""
        if self.sink is not None:
            self.sink(record)
            return
        line = (json.dumps(record, sort_keys=True, default=str) + "\n").encode()
        with self._io:
            if self._lost and self._pid == os.getpid():
                return
            try:
                self._open(record)
                gone = self._reattach()
                if gone is None:
                    self._written += _write_all(self._fd, line)
                    gone = _taken(self._fd, self._written)
            except OSError as exc:
                gone = errno.errorcode.get(exc.errno or 0, "EIO")
            if gone is not None:
                self._lost = True
                _mark_lost(self.directory, gone)

    def _open(self, record: dict[str, Any]) -> None:
        """Open this process's file on its first record (a forked child's first: a file of its own). Its name is
        the process's id and a random part: a later process given the same id (a killed one's) writes its own."""
        if self._pid == os.getpid():
            return
        forked = self._pid != -1
        self._pid, self._lost, self._written = os.getpid(), False, 0
        os.makedirs(self.directory, exist_ok=True)
        self._path = os.path.join(self.directory, f"records-{self._pid}-{os.urandom(4).hex()}.jsonl")
        self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_EXCL, 0o644)
        os.fchmod(self._fd, 0o644)  # readable by kgate whatever umask the command set
        self._file = _identity(os.fstat(self._fd))
        if forked and self._env is not None and record is not self._env:
            # The parent described where it runs before the fork: the child's file says it too, or its
            # launches would be of no known environment.
            self._written += _write_all(self._fd, (json.dumps(self._env, sort_keys=True, default=str) + "\n").encode())

    def _reattach(self) -> str | None:
        """Whether the descriptor this process writes with is still its record file's, under its name: a command
        that closed it (a daemon's clean-up of every descriptor) may have opened a file of its own under the same
        number, into which a record must never go. Where it is not, the file is opened again by its name;
        "removed" where that name no longer holds the file this process wrote (deleted, moved away, replaced)."""
        try:
            if _identity(os.fstat(self._fd)) == self._file == _identity(os.stat(self._path)):
                return None
        except OSError:
            pass  # closed, or the name holds nothing
        try:
            fd = os.open(self._path, os.O_WRONLY | os.O_APPEND)
        except FileNotFoundError:
            return "removed"
        if _identity(os.fstat(fd)) != self._file:
            os.close(fd)
            return "removed"
        self._fd = fd
        return None

    def hook(self, *, key: Any, repr: Any, fn: Any, compile: dict[str, Any], is_manual_warmup: bool,
             already_compiled: bool, **extra: Any) -> Any:
        previous = None
        if self.previous_hook is not None:
            previous = self.previous_hook(key=key, repr=repr, fn=fn, compile=compile,
                                          is_manual_warmup=is_manual_warmup, already_compiled=already_compiled,
                                          **extra)
        jit_function = fn.jit_function
        seen_key = (id(jit_function), str(key))
        with self.lock:
            rid = self.seen.get(seen_key)
            if rid is None:
                rid = self._record(jit_function, compile)
                self.seen[seen_key] = rid
            if self.counts and self.offline:
                self.launches[rid] = self.launches.get(rid, 0) + 1
            for bound in self.autotuned:
                bound.append(rid)
        return True if self.offline else previous

    def post_hook(self, *, key: Any, repr: Any, fn: Any, compile: dict[str, Any], is_manual_warmup: bool,
                  already_compiled: bool, **extra: Any) -> Any:
        """After the JIT compiled a specialisation: what the driver reports of the kernel it loads (`--verify`)."""
        previous = None
        if self.previous_post_hook is not None:
            previous = self.previous_post_hook(key=key, repr=repr, fn=fn, compile=compile,
                                               is_manual_warmup=is_manual_warmup, already_compiled=already_compiled,
                                               **extra)
        rid = self.seen.get((id(fn.jit_function), str(key)))
        if rid is not None:
            try:
                figures = live_figures(fn.jit_function, compile.get("device"), key)
            except Exception as exc:  # noqa: BLE001 - a recorder must never break the command it watches
                figures = {"error": f"{type(exc).__name__}: {exc}"}
            with self.lock:
                self._write({"type": "live", "id": rid, **figures})
        return previous

    def _describe(self, device: Any, arch: Any) -> None:
        """Once per process: where the launches happen (the GPU's name, or the offline target), the compute
        capability the launcher binds for there (`arch`, Triton's number: 90 for 9.0) and Triton."""
        if self._described:
            return
        self._described = True
        triton = sys.modules.get("triton")  # a process that compiles CuTe DSL kernels only may not import it

        where = self.where or _gpu_name(device) or "GPU"
        self._env = {"type": "env", "where": where}
        if triton is not None:
            self._env["triton"] = str(getattr(triton, "__version__", "?"))
        if "cutlass.cute" in sys.modules:  # the CuTe DSL's release (nvidia-cutlass-dsl)
            self._env["cute-dsl"] = str(getattr(sys.modules.get("cutlass"), "__version__", "?"))
        if isinstance(arch, int) and not isinstance(arch, bool) and arch > 0:
            self._env["capability"] = f"{arch // 10}.{arch % 10}"
        self._write(self._env)

    def _record(self, jit_function: Any, compile: dict[str, Any]) -> str:
        name = f"{getattr(jit_function, 'module', '?')}:{getattr(getattr(jit_function, 'fn', None), '__qualname__', '?')}"
        arch = None
        try:
            _cache, target, backend = _device_cache(jit_function, compile.get("device"))
            arch = getattr(target, "arch", None)
            record = specialization_record(jit_function, compile, backend)
        except Unsupported as exc:
            record = {"kernel": name, "problem": str(exc)}
        except Exception as exc:  # noqa: BLE001 - a recorder must never break the command it watches
            record = {"kernel": name, "problem": f"kgate could not read this launch: {type(exc).__name__}: {exc}"}
        self._describe(compile.get("device"), arch)
        rid = hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()[:20]
        self.specs[rid] = record
        self._write({"type": "spec", "version": RECORD_VERSION, "id": rid, **record})
        return rid

    def cute(self, record: dict[str, Any]) -> str:
        """A `cute.compile` call (`kgate.capture.cute_record`), once a process; the environment described first.
        Returns the record's id."""
        rid = hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()[:20]
        with self.lock:
            if rid not in self.cute_seen:
                self.cute_seen.add(rid)
                self._describe(None, int(os.environ.get(ENV_TARGET) or 0) if self.offline else None)
                self._write({"type": "cute", "version": RECORD_VERSION, "id": rid, **record})
        return rid

    def cute_live(self, rid: str, compiled: Any) -> None:
        """What the driver reports of the kernels of a recorded `cute.compile` call (`--verify`), once a call."""
        with self.lock:
            if rid in self.cute_measured:
                return
            self.cute_measured.add(rid)
        try:
            figures = _sibling("cute_live").figures(compiled, _sibling("cute_record").core("cute_dsl"))
        except Exception as exc:  # noqa: BLE001 - a recorder must never break the command it watches
            figures = {"error": f"{type(exc).__name__}: {exc}"}
        with self.lock:
            self._write({"type": "live", "id": rid, **figures})

    def picked(self, rids: list[str], config: Any) -> None:
        """The autotuner chose `config` after benchmarking: mark the record of it that this call bound."""
        if self.offline or config is None:
            return
        wanted = dict(getattr(config, "kwargs", {}))
        for rid in dict.fromkeys(rids):
            record = self.specs.get(rid, {})
            options = record.get("options", {})
            if all(record.get("constexprs", {}).get(k, object()) == _plain(v) for k, v in wanted.items()) \
                    and options.get("num_warps") == config.num_warps and options.get("num_stages") == config.num_stages:
                self._write({"type": "picked", "id": rid})

    def finish(self) -> None:
        """At exit: launch counts, when asked for (once a process, however it ends)."""
        if self._finished:
            return
        self._finished = True
        try:
            for rid, count in sorted(self.launches.items()):
                self._write({"type": "launches", "id": rid, "count": count})
        except Exception:  # noqa: BLE001 - at exit there is nobody left to tell
            pass


LOST = "lost-"  # an empty `lost-<pid>-<why>` (an errno name, "removed", "truncated"): the records are incomplete


def _write_all(fd: int, data: bytes) -> int:
    """os.write until all of `data` is written (a write may stop short, at a file size limit or a full disk)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]
    return len(data)


def _identity(status: os.stat_result) -> tuple[int, int]:
    return status.st_dev, status.st_ino


def _taken(fd: int, written: int) -> str | None:
    """Why what this process wrote is no longer all in its file: "removed" (the file was deleted while it ran,
    and writes go nowhere anyone reads), "truncated" (cut shorter than what was written); None while it is."""
    status = os.fstat(fd)
    if status.st_nlink == 0:
        return "removed"
    return "truncated" if status.st_size < written else None


def _mark_lost(directory: str, reason: str) -> None:
    """An empty file (else a folder, which takes no descriptor) whose name says the process's records are
    incomplete and why: it needs no room on a full disk. Where even that fails, nothing more can be said."""
    path = os.path.join(directory, f"{LOST}{os.getpid()}-{reason}")
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
        return
    with contextlib.suppress(OSError):
        os.mkdir(path)


def _gpu_name(device: Any) -> str | None:
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return str(torch.cuda.get_device_name(device if isinstance(device, int) else None))
    except Exception:  # noqa: BLE001 - the name is a label only
        pass
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
        handle = ctypes.c_int(0)
        buffer = ctypes.create_string_buffer(256)
        if lib.cuDeviceGet(ctypes.byref(handle), ctypes.c_int(device if isinstance(device, int) else 0)) == 0 \
                and lib.cuDeviceGetName(buffer, 256, handle) == 0:
            return buffer.value.decode(errors="replace")
    except (OSError, AttributeError):
        pass
    return None


def _plain(value: Any) -> Any:
    try:
        return encode_constant(value)
    except Unsupported:
        return repr(value)


def live_figures(jit_function: Any, device: Any, key: Any) -> dict[str, Any]:
    """Registers, spills, shared and local memory of the kernel the JIT loaded for one specialisation."""
    cache, target, _backend = _device_cache(jit_function, device)
    kernel = cache.get(key)
    if kernel is None or not hasattr(kernel, "metadata"):
        return {"error": "the JIT holds no compiled kernel for this specialisation"}
    out: dict[str, Any] = {"arch": int(getattr(target, "arch", 0) or 0), "shared": int(kernel.metadata.shared)}
    try:
        kernel._init_handles()
    except Exception as exc:  # noqa: BLE001 - e.g. OutOfResources: the kernel cannot be loaded at all
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    out["n_regs"] = int(kernel.n_regs)
    out["n_spills"] = int(kernel.n_spills)
    local = _function_attribute(kernel.function, 3)  # CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
    if local is not None:
        out["local"] = local
    return out


def _function_attribute(function: int, attribute: int) -> int | None:
    """cuFuncGetAttribute through the driver library the process already loaded."""
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
        value = ctypes.c_int(0)
        status = lib.cuFuncGetAttribute(ctypes.byref(value), ctypes.c_int(attribute), ctypes.c_void_p(function))
    except (OSError, AttributeError):
        return None
    return int(value.value) if status == 0 else None


# --------------------------------------------------------------------------- installing the hooks


_RECORDER: Recorder | None = None


def install(recorder: Recorder, capability: int | None) -> None:
    """Hook the imported Triton: the JIT cache hook, and offline the driver and the autotuner."""
    global _RECORDER
    _RECORDER = recorder
    from triton import knobs
    from triton.runtime import autotuner, jit

    _serializable_hook_data(jit)

    recorder.previous_hook = knobs.runtime.jit_cache_hook
    knobs.runtime.jit_cache_hook = recorder.hook
    if recorder.live and not recorder.offline:
        recorder.previous_post_hook = knobs.runtime.jit_post_compile_hook
        knobs.runtime.jit_post_compile_hook = recorder.post_hook
    if recorder.offline:
        from triton.runtime.driver import driver

        driver.set_active(offline_driver(capability or 120))
    _wrap_autotuner(autotuner.Autotuner, recorder)


def _serializable_hook_data(jit: Any) -> None:
    """Triton's launcher turns a launch into JSON for a JIT hook (`serialize_specialization_data`), and fails on a
    constexpr JSON has no form for: a Gluon layout (`gl.BlockedLayout`, passed as Gluon's tutorials pass it), a
    `@gluon.jit` function. Without a hook nothing asks for that JSON, so the launch that works without kgate would
    fail under it: such a constant is given to the JSON in kgate's own form (`encode_constant`), or as its repr."""
    original = jit.serialize_specialization_data
    if getattr(original, "__kgate__", False):
        return

    def serialize(name: Any, signature: Any, constants: dict[Any, Any], *rest: Any, **kwargs: Any) -> Any:
        try:
            return original(name, signature, constants, *rest, **kwargs)
        except TypeError:
            return original(name, signature, {k: _json_form(v) for k, v in constants.items()}, *rest, **kwargs)

    serialize.__kgate__ = True  # type: ignore[attr-defined]
    jit.serialize_specialization_data = serialize


def _json_form(value: Any) -> Any:
    """A constant as it is where JSON holds it, else as kgate's files hold it, else its repr."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        pass
    try:
        return encode_constant(value)
    except Unsupported:
        return repr(value)


def _wrap_autotuner(cls: Any, recorder: Recorder) -> None:
    original_run = cls.run
    if getattr(original_run, "__kgate__", False):
        return

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if recorder.offline:
            self.cache_results = False  # a disk cache of an earlier GPU run would hide the other configs
            self.__dict__["do_bench"] = bind_once  # also in place of a benchmarker the project passed
        bound: list[str] = []
        recorder.autotuned.append(bound)
        try:
            return original_run(self, *args, **kwargs)
        finally:
            recorder.autotuned.remove(bound)
            if bound:
                recorder.picked(bound, getattr(self, "best_config", None))

    run.__kgate__ = True  # type: ignore[attr-defined]
    cls.run = run


class _WhenLoaded(importlib.abc.MetaPathFinder):
    """Installs the hooks the moment a package (Triton, the CuTe DSL's `cutlass.cute`) has run, whoever imports it
    and however.

    It stays first on `sys.meta_path` until then: a look-up that loads nothing (`importlib.util.find_spec`,
    which torch runs at import and when asked about the device) gets a spec whose loader installs the hooks
    if it is ever executed, and the finder is still there for the import that really loads Triton.
    """

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name = name
        self.then = then
        self.done = False
        self.looking = threading.local()  # this thread is asking the other finders (no recursion into this one)

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != self.name or self.done or getattr(self.looking, "active", False):
            return None
        self.looking.active = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.looking.active = False
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _ThenLoader(spec.loader, self.loaded)
        return spec

    def loaded(self) -> None:
        """The package has run: install once, and leave the import system as it was."""
        if self.done:
            return
        self.done = True
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        self.then()


class _ThenLoader(importlib.abc.Loader):
    """Triton's own loader, then the hooks; the module keeps Triton's loader as its own once it has run."""

    def __init__(self, loader: Any, then: Callable[[], None]) -> None:
        self.loader = loader
        self.then = then

    def __getattr__(self, name: str) -> Any:  # is_package, get_resource_reader, ... are the real loader's
        return getattr(self.loader, name)

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self.loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self.loader
        self.loader.exec_module(module)
        self.then()


class _ChildWatch:
    """An audit hook: names a Python child started with an environment that drops the capture (a PYTHONPATH of
    its own without kgate's folder, or none of kgate's variables, given to the child or left in this process's
    own environment when the child inherits it), whose launches kgate cannot record."""

    EVENTS = ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn")

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.boot = os.path.join(os.path.dirname(os.path.realpath(__file__)), "boot")  # what PYTHONPATH must hold
        self.said: set[str] = set()

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in self.EVENTS:
            return
        try:
            self.check(args)
        except Exception:  # noqa: BLE001 - a recorder must never break the command it watches
            pass

    def check(self, args: tuple[Any, ...]) -> None:
        path, argv, env = args[0], args[1], args[-1]
        if env is None:
            env = os.environ  # the child inherits this process's environment as it is now, which it may have changed
        if not isinstance(env, Mapping):
            return
        words = [os.fsdecode(a) for a in ([argv] if isinstance(argv, (str, bytes)) else list(argv or ()))]
        program = os.path.basename(os.fsdecode(path)) if path else (words[0].split()[0] if words else "")
        if not os.path.basename(program).startswith("python") and os.fsdecode(path or "") != sys.executable:
            return
        values = {os.fsdecode(k): os.fsdecode(v) for k, v in env.items()}
        folders = [os.path.realpath(p) for p in values.get("PYTHONPATH", "").split(os.pathsep) if p]
        kept = values.get(ENV_DIR) == self.recorder.directory and self.boot in folders
        command = " ".join(words)[:200]
        if not kept and command not in self.said:
            self.said.add(command)
            self.recorder._write({"type": "lost-child", "command": command})


def run_setup(setup: str, paths: list[str]) -> None:
    """The project's set-up hook: "module:function" (called) or a Python file (run), before its code loads."""
    for path in reversed(paths):
        if path and path not in sys.path:
            sys.path.insert(0, path)
    if setup.endswith(".py"):
        import runpy

        runpy.run_path(setup, run_name="__kgate_setup__")
        return
    module, _, function = setup.partition(":")
    loaded = importlib.import_module(module)
    if function:
        getattr(loaded, function)()


def install_from_env() -> None:
    """Called from the captured process's sitecustomize: set up from the environment `kgate capture` set."""
    directory = os.environ.get(ENV_DIR)
    if not directory:
        return
    offline = os.environ.get(ENV_MODE) == "offline"
    capability = int(os.environ.get(ENV_TARGET) or 0) or None
    recorder = Recorder(directory, offline, os.environ.get(ENV_LIVE) == "1", os.environ.get(ENV_COUNTS) == "1")
    atexit.register(recorder.finish)
    recorder._write({"type": "start"})  # this process runs the recorder (kgate tells "never loaded" apart)
    sys.addaudithook(_ChildWatch(recorder))
    setup = os.environ.get(ENV_SETUP)

    def hooked() -> None:
        install(recorder, capability)
        recorder._write({"type": "triton"})

    def cute_hooked() -> None:
        measure = recorder.cute_live if recorder.live and not recorder.offline else None
        _sibling("cute_record").install(sys.modules["cutlass.cute"], recorder.cute, measure, recorder.offline)
        recorder._write({"type": "cute-dsl"})

    hooks: list[tuple[str, Callable[[], None]]] = [("triton", hooked), ("cutlass.cute", cute_hooked)]
    if offline:
        hooks.append(("torch", offline_torch))
    for name, then in hooks:
        if name in sys.modules:  # imported before this process's first line (a .pth file)
            then()
        else:
            sys.meta_path.insert(0, _WhenLoaded(name, then))
    if setup:
        try:
            run_setup(setup, os.environ.get(ENV_SETUP_PATH, "").split(os.pathsep))
        except BaseException as exc:  # noqa: BLE001 - said once, then the command runs as it would
            recorder._write({"type": "setup-error", "error": f"{type(exc).__name__}: {exc}"})
            print(f"kgate: the set-up hook {setup} failed: {type(exc).__name__}: {exc}", file=sys.stderr)


# --------------------------------------------------------------------------- binding example arguments


class ExamplePointer:
    """A stand-in for a tensor argument: what Triton's binder reads of one (its dtype and its address)."""

    def __init__(self, dtype: Any, address: int) -> None:
        self.dtype = dtype
        self.address = address

    def data_ptr(self) -> int:
        return self.address


class HeuristicError(Exception):
    """A `triton.heuristics` value cannot be computed from a registration's example arguments."""


def layers(obj: Any) -> list[Any]:
    """What a launch of `obj` goes through, outermost first, down to the JITFunction it ends in: the wrappers in
    between (an autotuner, heuristics, a project's own launcher class) each hold the next one as `fn`, as
    Triton's own do. Raises ValueError when `obj` ends in no JITFunction."""
    from triton.runtime.jit import JITFunction

    out = [obj]
    while not isinstance(obj, JITFunction):
        obj = getattr(obj, "fn", None)
        if obj is None or len(out) > 8:
            raise ValueError("not a @triton.jit function")
        out.append(obj)
    return out


def bind(fn: Any, args: list[Any], kwargs: dict[str, Any], capability: int) -> dict[str, Any]:
    """The specialisation Triton's launcher computes for `fn[grid](*args, **kwargs)` on `capability`.

    Runs the launcher itself (offline driver, hook answering "skip"), so nothing is compiled. `fn` is what the
    project launches: a JITFunction or any wrappers around one, each of which runs as in a launch, so heuristics
    compute their values from the arguments. An autotuner runs the one config whose values `kwargs` holds, as if
    it had tuned to it: that config's constexprs and options reach the wrappers below it, not those above.
    """
    from triton import knobs
    from triton.runtime import jit
    from triton.runtime.driver import driver

    _serializable_hook_data(jit)
    records: list[dict[str, Any]] = []
    recorder = Recorder("", True, False, False, sink=records.append)
    saved_driver = driver._active
    saved_hook = knobs.runtime.jit_cache_hook
    driver.set_active(offline_driver(capability))
    knobs.runtime.jit_cache_hook = recorder.hook
    restore: list[tuple[Any, str, Any]] = []
    try:
        kwargs = _tuned_to(fn, kwargs, restore)
        _name_heuristics(fn, restore)
        start = next(layer for layer in layers(fn) if callable(getattr(layer, "run", None)))
        start.run(*args, grid=(1,), warmup=True, **kwargs)
    finally:
        for obj, attr, value in reversed(restore):
            if value is _ABSENT:
                obj.__dict__.pop(attr, None)
            else:
                obj.__dict__[attr] = value
        knobs.runtime.jit_cache_hook = saved_hook
        driver._active = saved_driver
    specs = [r for r in records if r.get("type") == "spec"]
    if len(specs) != 1:
        raise Unsupported(f"the launcher bound {len(specs)} specialisations for one call")
    spec = specs[0]
    if "problem" in spec:
        raise Unsupported(spec["problem"])
    return {k: v for k, v in spec.items() if k not in ("type", "version", "id")}


_ABSENT = object()


def _set(obj: Any, attr: str, value: Any, restore: list[tuple[Any, str, Any]]) -> None:
    """Set an attribute of a wrapper for one binding; `bind` puts the old value back."""
    restore.append((obj, attr, obj.__dict__.get(attr, _ABSENT)))
    obj.__dict__[attr] = value


def _tuned_to(fn: Any, kwargs: dict[str, Any], restore: list[tuple[Any, str, Any]]) -> dict[str, Any]:
    """Each autotuner around the kernel left with the one config `kwargs` holds (its pre-hook, which acts on
    tensors at run time, left out); the launch's own arguments without what those configs add."""
    from triton.runtime.autotuner import Autotuner

    outer = dict(kwargs)
    for tuner in layers(fn):
        if not isinstance(tuner, Autotuner):
            continue
        config = next((c for c in tuner.configs if _holds(kwargs, c)), None)
        if config is None:
            raise Unsupported("an autotuner none of whose configs is the variant planned (an autotuner inside "
                              "another one?)")
        one = copy.copy(config)
        one.pre_hook = None
        _set(tuner, "configs", [one], restore)
        for name in one.all_kwargs():
            outer.pop(name, None)
    return outer


def _holds(kwargs: dict[str, Any], config: Any) -> bool:
    """Whether `kwargs` holds the config's constexprs and options (the ones a planned variant carries)."""
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages, "maxnreg": config.maxnreg}
    return all(name in kwargs and _plain(kwargs[name]) == _plain(value) for name, value in config.kwargs.items()) \
        and all(kwargs.get(name) == value for name, value in options.items())


class _Reading(dict[str, Any]):
    """The arguments a heuristic is given, noting the first name it asks for that the launch does not hold."""

    missing: str | None = None

    def __missing__(self, key: Any) -> Any:
        if self.missing is None:
            self.missing = str(key)
        raise KeyError(key)


def _name_heuristics(fn: Any, restore: list[tuple[Any, str, Any]]) -> None:
    """Every `triton.heuristics` value of the kernel computed as Triton computes it, a failure named: which
    heuristic, and what it read that the launch does not hold."""
    from triton.runtime.autotuner import Heuristics

    def named(name: str, heuristic: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        def compute(launch: dict[str, Any]) -> Any:
            reading = _Reading(launch)
            try:
                return heuristic(reading)
            except Exception as exc:  # noqa: BLE001 - whatever a heuristic raises is named, then reported
                if reading.missing is not None:
                    raise HeuristicError(f"the heuristic for {name} reads {reading.missing!r}, which the "
                                         f"registration gives no value for (add it to its constexprs)") from None
                raise HeuristicError(f"the heuristic for {name} failed on the registration's example arguments: "
                                     f"{type(exc).__name__}: {exc}") from None

        return compute

    for layer in layers(fn):
        values = getattr(layer, "values", None)
        if isinstance(layer, Heuristics) and isinstance(values, dict):
            _set(layer, "values", {name: named(name, h) for name, h in values.items()}, restore)


def heuristic_names(fn: Any) -> list[str]:
    """The constexprs `triton.heuristics` wrappers around the kernel compute."""
    from triton.runtime.autotuner import Heuristics

    return sorted({name for layer in layers(fn) if isinstance(layer, Heuristics)
                   for name in getattr(layer, "values", {}) or {}})
