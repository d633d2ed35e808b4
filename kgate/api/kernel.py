"""One kernel compiled on request: `kgate.api.compile_kernel` and the pytest fixture `kgate_compile`.

A kernel given here is compiled as a `kgate.register` of it with the same fields would be by `kgate check`:
the same collect, compile and facts stages, the same cache (the project's `cache-dir`), so a second run with
an unchanged kernel compiles nothing.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from kgate.api.arguments import ArgumentError, validated
from kgate.api.results import KernelFacts
from kgate.api.setup import PathLike, project_config
from kgate.core.config import Config, parse_triton_entry
from kgate.core.errors import ConfigError, KgateError


class CompileError(KgateError):
    """The compiler rejected a kernel variant (`kgate check` reports it as a compile-error finding, KG001)."""


@validated
def compile_variants(kernel: Any, *, target: str | None = None, project: PathLike | None = None,
                     config: PathLike | None = None, cache: bool = True, sass: bool = False,
                     **fields: Any) -> tuple[KernelFacts, ...]:
    """Compile every variant of a Triton kernel that these fields describe for one target; their facts.

    `kernel`: the `@triton.jit` (or autotuned) function, or its name as `"package.module:function"`.
    `fields`: a `kgate.register`'s keyword arguments (`signature`, `constexprs`, `num_warps`, `variants`,
    `args`, ...). `target`: default the project's first target. `project`/`config`: where the configuration is
    found (default: above the kernel's file); its `python-path`, `setup` and `cache-dir` apply.
    """
    return _variants("compile_variants", kernel, target, project, config, cache, sass, fields)


@validated
def compile_kernel(kernel: Any, *, target: str | None = None, project: PathLike | None = None,
                   config: PathLike | None = None, cache: bool = True, sass: bool = False,
                   **fields: Any) -> KernelFacts:
    """Compile one variant of a Triton kernel for one target and return its facts (see `compile_variants`):

        facts = compile_kernel(scale, signature={"x": "*fp16", "n": "i32"}, constexprs={"BLOCK": 1024})
        assert facts.spills == 0

    Raises `CompileError` when the compiler rejects it, and `kgate.api.KgateError` for a mistake in the fields,
    fields that describe several variants among them (`variants`, several `args` tables, an autotune of several
    configs: use `compile_variants`)."""
    found = _variants("compile_kernel", kernel, target, project, config, cache, sass, fields)
    if len(found) != 1:  # an autotune's configs are known once the kernel is imported
        shown = ", ".join(f.variant for f in found)
        raise ArgumentError(f"compile_kernel(): {found[0].kernel}: {len(found)} variants ({shown}): use "
                            f"compile_variants")
    return found[0]


def _variants(function: str, kernel: Any, target: str | None, project: PathLike | None, config: PathLike | None,
              cache: bool, sass: bool, fields: dict[str, Any]) -> tuple[KernelFacts, ...]:
    name, folder, root = _kernel_name(kernel)
    cfg = project_config(project if project is not None else folder, config)
    cfg = _importable(cfg, root)
    chosen = target or cfg.targets[0]
    entry = parse_triton_entry({**fields, "kernel": name}, f"{function}() on {name}")
    if function == "compile_kernel" and (entry.variants or len(entry.args) > 1):  # refused before compiling
        raise ArgumentError(f"compile_kernel(): {name}: the fields describe several variants (`variants`, several "
                            f"`args` tables): use compile_variants")
    return _compile(cfg, entry, chosen, cache=cache, sass=sass)


def _compile(config: Config, entry: Any, target: str, *, cache: bool, sass: bool) -> tuple[KernelFacts, ...]:
    from kgate.core.selection import build_selection
    from kgate.evaluate.plan import selection_plan
    from kgate.pipeline.check import compile_kernels
    from kgate.shard.run import CheckOptions

    options = CheckOptions(targets=(target,), jobs=1, sass=sass, no_cache=not cache, language="triton")
    # The SASS `kgate check` reads of the kernel under the project's selection (every kernel's with `sass`).
    plan = selection_plan(build_selection(config), sass_every=sass)
    compiled, _covered = compile_kernels(config, [entry], [], options, plan)
    mine = [f for f in compiled.failures if f.kernel == entry.kernel and f.target in (target, "")]
    if mine:
        first = mine[0]
        if not first.target:  # the fields' own mistake (a constexpr without a value), before any compile
            raise ConfigError(f"{first.kernel}: {first.message}")
        raise CompileError(f"{first.kernel} [{first.variant}] {first.target}: {first.message}", path=first.path,
                           line=first.line)
    facts = tuple(KernelFacts.of(f) for f in compiled.facts if f.kernel == entry.kernel and f.target == target)
    if not facts:
        raise ConfigError(f"{entry.kernel}: nothing compiled for {target} (its registration names other targets)")
    return facts


def _kernel_name(kernel: Any) -> tuple[str, Path | None, Path | None]:
    """("module:function", the folder of its file, the folder its module is imported from) of a kernel; the
    folders are None for a kernel given by name."""
    import inspect  # only where a kernel object is given: `kgate lint` imports this package too

    if isinstance(kernel, str):
        return kernel, None, None
    fn = kernel
    while not inspect.isfunction(fn) and getattr(fn, "fn", None) is not None:  # Autotuner -> JITFunction -> def
        fn = fn.fn
    if not inspect.isfunction(fn):
        raise ConfigError(f"{kernel!r}: not a Triton kernel (give the @triton.jit function or 'module:function')")
    module, function = fn.__module__, fn.__name__
    if module == "__main__" or "<locals>" in fn.__qualname__:
        raise ConfigError(f"{function}: kgate compiles a kernel by importing it: define it at the top of an "
                          f"importable module, not in {'__main__' if module == '__main__' else 'a function'}")
    file = Path(inspect.getsourcefile(fn) or fn.__code__.co_filename).resolve()
    depth = len(module.split(".")) - (0 if file.name == "__init__.py" else 1)
    root = file.parent
    for _ in range(depth):
        root = root.parent
    return f"{module}:{function}", file.parent, root


def _importable(config: Config, root: Path | None) -> Config:
    """The configuration with the kernel module's import folder on its python-path (a test module imported by
    pytest from a folder the project does not list)."""
    if root is None or any((config.root / p).resolve() == root for p in config.python_path):
        return config
    return replace(config, python_path=(*config.python_path, os.path.relpath(root, config.root)))
