"""## What it does
Flags an atomic in an autotuned Triton kernel whose result changes when the
autotuner runs the kernel again on the same buffers: an atomic on a pointer
argument that the `triton.autotune` decorator lists in neither
`reset_to_zero` nor `restore_value`, and that is not idempotent under
repetition. Atomics are found as functions and as tensor methods; pointers
are traced through local variables (`ptrs = out + offs`) and through calls
to `@triton.jit` helpers of the same module.

What each atomic does when a benchmark run repeats it with the same
operands:

| atomic | repeated | reported |
|---|---|---|
| `atomic_add` | adds again (Triton has no `atomic_sub`: a negative add) | always |
| `atomic_xor` | flips the same bits back | always |
| `atomic_max`, `atomic_min` | the extremum of the same values: unchanged | when read back |
| `atomic_and`, `atomic_or` | clears or sets the same bits: unchanged | when read back |
| `atomic_xchg` | writes the same value: unchanged | when read back |
| `atomic_cas` | finds the value it swapped in and leaves it: unchanged | when read back |

An idempotent atomic leaves memory as the first run left it, but a kernel
that reads the buffer back sees what the previous run left there instead of
the caller's contents. "Read back" means the old value the atomic returns
is used (`if tl.atomic_cas(slot, 0, 1) == 0:`, `was = tl.atomic_xchg(f, 1)`
when `was` is read), or the kernel loads the buffer (`tl.load(count)`). It
is not reported when the kernel also puts the buffer back, i.e. writes a
second value into it with `tl.store`, `atomic_xchg` or `atomic_cas`: a
spin lock taken with `atomic_cas(lock, 0, 1)` and released with
`atomic_xchg(lock, 0)` is free again for the next run. A `cas` that claims
a slot once and never releases it is reported: the run after the first
finds the slot taken and takes the other branch.

It also flags an autotuned kernel that rewrites a buffer in place: a
`tl.store` that writes back, at the very address it loaded from (the same
pointer expression: `ptrs`, `x_ptr + offs`), a value computed from that
load (`x = tl.load(x_ptr + offs); tl.store(x_ptr + offs, x * 2)`), through
the names assigned before the store and outside the other branches of the
`if`s around it, for a buffer `restore_value` does not name. Not reported:
a store into other elements than those read (a chunk's rows written from
earlier chunks'), a `tl.where(mask, value, x)` that keeps the loaded value
as it is (a masked fill selects the same elements on every run; what it
takes of `x`'s type, `x.dtype`, is no dependence), and a buffer the kernel
sets, on every path, before it reads it. An in-place kernel whose update
is idempotent in some other way (`tl.maximum(x, 0)`) is reported: list it
in `restore_value` all the same, which costs one copy while tuning.

A kernel with an input and an output of its own is in place all the same
when a launch in its module passes one tensor for both: `_ce_fwd[grid](Z=z,
DZ=z, ...)`, or `add[grid](x, y, x, n)` where the kernel loads through `X`
and writes through `O`. Each benchmark run then reads what the previous one
wrote. It is reported at the argument the kernel writes through, unless
`restore_value` (or `reset_to_zero`) names either parameter; the same
tensor passed to two parameters the kernel only reads is not reported.

## Why is this bad?
While it tunes, the autotuner launches the kernel once per config, several
times each, on the caller's real buffers. An atomic accumulation
(split-K partial sums, histograms, counters) then adds every benchmark run
into the output: the first call after a new key returns a wrong result,
typically a multiple of the right one, and the error disappears on later
calls, so tests that run a shape once can miss it. A flag or a claimed
slot that the first benchmark run set makes every later run skip the work
it guards. An `amax` kept with `atomic_max` is the same after any number of
runs, and is not reported.

An in-place kernel (a scale, a rotary embedding applied to `q`, an
accumulation `acc += x` into its own argument) is the same: each benchmark
run applies it again to what the previous run left, so the first call
after a new key returns the kernel applied as many times as the autotuner
ran it.

## Example
```python
@triton.autotune(configs=CONFIGS, key=["K"])
@triton.jit
def matmul_splitk(a, b, c, M, N, K, BLOCK_K: tl.constexpr):
    ...
    tl.atomic_add(c + offs, acc, mask=mask)
```

## Use instead
Name the buffer in `reset_to_zero` (zeroed before each benchmark run) or
`restore_value` (saved and put back), or pass a `pre_hook` that resets it:

```python
@triton.autotune(configs=CONFIGS, key=["K"], reset_to_zero=["c"])
@triton.jit
def matmul_splitk(a, b, c, M, N, K, BLOCK_K: tl.constexpr):
    ...
    tl.atomic_add(c + offs, acc, mask=mask)
```

A `pre_hook`, the decorator's or a config's own
(`triton.Config(..., pre_hook=init_to_zero("c"))`), resets the arguments
it calls `zero_()`, `fill_(...)` or `copy_(...)` on through the argument
dict it is given (`nargs["c"].zero_()`). kgate reads a hook that is a
lambda, a function of the module, or a call of a module function that
returns one; in a hook that loops over a literal list (`for name in
["dw", "db"]: nargs[name].zero_()`), `nargs[name]` stands for that list's
names; in a hook made by such a call, `nargs[name]` with `name` not a
literal stands for every name the call passes (`init_to_zero(["dq",
"dk"])`). A hook attached under a condition (`pre_hook=zero_c if split_k >
1 else None`) counts as the hook. A hook it cannot read (imported from
elsewhere) is trusted to reset what it must.

A config's pre_hook protects the buffer only when every config that runs
the atomic resets it. The configs are followed through list literals, `+`,
`a if flag else b`, comprehensions, module constants, names assigned in the
branches of a module-level `if`, functions of the module that build the
list (a config's `pre_hook=pre_hook` taking what the call passes for that
parameter), and calls of other functions given configs (assumed to choose among
them); a constexpr value taken from a loop over literals (`for split_k in
[1]`, `for block, split in TABLE`) is known when the loop gives one value.
Parts of the list that cannot be read (a list built in another module) are
left out and the configs that can be read decide; when none can be read,
config hooks protect nothing. A hook made by a call whose names cannot be
listed (`init_to_zero(*[f"C{i}" for i in ...])`) is trusted. An
`early_config_prune` function of the module that builds configs of its
own and hands back only those (one by one, or in a list or comprehension of
them) replaces the list with them (a pruner that hands back some of the
configs it was given, `yield from configs` too, adds its own to the list). A config
whose literal constexpr values make an `if` around the atomic take the
other branch does not run it: with `if SPLIT_K == 1: tl.store(...) else:
tl.atomic_add(...)`, only the split-K configs need a hook, and when every
config of a list read whole takes the other branch the atomic is not
reported. A
`@triton.heuristics` entry that always gives the same literal
(`"SPLIT_K": lambda args: 1`, or a module function every `return` of
which does) fixes that constexpr under every config: an atomic its `if`
never reaches is not reported.

An autotuner given exactly one config (a list literal of one
`triton.Config`, a module constant holding one that nothing changes or
gives to a call, or a module function called without arguments that hands
back one, in a module that never reaches an autotuner's `.configs`) is never
reported: Triton runs a single config as it is, without benchmarking, so
no run finds what another left.

An add is not reported either when, before it and on every path to it,
the kernel stores through the same address (the store's pointer adds to
every term of the atomic's: `tl.store(d + row + offs, ...)` then
`tl.atomic_add(d + row, x)`): each run overwrites what the previous one
added before adding again. The names in the atomic's pointer must be
assigned once in the kernel: a `ptrs` reassigned for another tile (a
stream-K kernel storing whole tiles, then adding partial ones) is not the
address the store wrote.

An atomic on a pointer that cannot be traced to a parameter is reported
only when nothing resets anything at all (and, for an idempotent atomic,
only when its old value is used). A pointer moved in place (`ptrs +=
stride`) stays based on what it was. Loads and stores are followed in the
kernel and in the helpers that perform atomics.

## Autotune in every form
Triton may be reached through the project's own module (`from
pkg.triton_utils import tl, triton`, `import pkg.triton_utils as tu` and
`tu.tl.atomic_add`): names are followed into it, as if the kernel module
imported Triton itself. Besides a `@triton.autotune(...)` decorator on the kernel, KG202 reads the
autotuner applied by a call (`tuned = triton.autotune(configs=CONFIGS,
key=[...])(kernel)`, also on `triton.jit(fn)`), through an alias (`tune =
triton.autotune`) or a `functools.partial` of it, and through a wrapper: a
function of the module, or of another module of the project that it
imports, that calls `triton.autotune` (or another wrapper) and passes on
its own parameters, by name or as `**kwargs`:

```python
# tuning.py
def get_autotune_kernel(kernel, configs, **kwargs):
    return triton.autotune(configs=configs, **kwargs)(kernel)
```

A wrapper of another module is read only when its name says it tunes
(`*tune*`). The kernel may be chosen through a local variable (`kernel =
bwd_persistent if persistent else bwd`: both are judged) or be imported
from another module of the project (`triton.autotune(...)(kernels.bwd)`):
then the finding is at the application, and names the atomic in the
kernel's file. Options spread into a decorator (`**KW`) are read where
they are a dict literal or `dict(...)`, directly or through a module
constant; any other spread may reset anything and is trusted.
`reset_to_zero`, `restore_value`, `pre_hook`, `configs` and
`prune_configs_by` are read from the call as from a decorator; a value
written in another module (a wrapper's own `pre_hook`) is trusted.

A reset list the launcher builds per call is followed through the
assignments of literal lists, `append`, `extend` and `+=` of literals before
the call, on every path through the `if`s on the way (a test on the list
itself, `if len(restore) == 0: restore = None`, is decided by its value):

```python
restore = ()
if varlen:
    restore = ("dq", "dk")
else:
    restore = ("dk",)
get_autotune_kernel(bwd, CONFIGS, key=["N"], restore_value=restore)
```

A buffer the kernel accumulates into that the list holds on no path is an
error, as for a decorator. One it holds on some paths only (`dq` above) is a
warning that names the condition under which it is restored (`varlen`):
the other launches accumulate, but the project has thought about the
buffer, and the condition may match the only mode in which the kernel adds
into it. A list built in any other way (a call, a parameter, a loop over a
variable) is trusted. When a list names the buffer with another case
(`Dv` for `DV`), the finding says so: Triton matches names exactly.

## Options
None.

## References
- Triton's `triton.autotune` documentation (`reset_to_zero`, `restore_value`).
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from collections.abc import Iterable, Iterator

from kgate.collect import pyautotune
from kgate.collect import pysource as py
from kgate.collect.pyaccess import (
    ACCUMULATING,
    Access,
    KernelModule,
    in_place_writes,
    repeats_differently,
    written_first,
)
from kgate.collect.pyconfigs import Partial, Tuning, hooks_reset, reaching, single_config
from kgate.collect.pyguards import guards, truth
from kgate.collect.pyresets import protected
from kgate.collect.pyscopes import launch_lines, launched_name, passed_for
from kgate.collect.pysource import Function
from kgate.collect.source import SourceFile
from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import Report, Rule, SourceContext


def check(source: SourceFile, ctx: SourceContext) -> Iterable[Report]:
    if b"autotune" not in source.data:
        return  # atomics outside autotuned kernels are fine: no need to parse
    if b"atomic_" not in source.data and not (b"store" in source.data and b"load" in source.data):
        # No atomic and no kernel that could write back what it read here, but the autotuner may be applied here to a
        # kernel of another module that has them (the whole module read from the blocks the other rules' readings
        # parsed: nothing here reads those readings).
        if _applied_otherwise(source):
            whole = py.ParsedModule(py.whole_tree(source), origin=source)
            if whole.uses_triton():
                yield from _applications(source, None, whole)
        return
    info = py.info(source)
    if not info.uses_triton():
        return
    module = KernelModule(source, info)
    reported: dict[str, set[tuple[int, int, str]]] = {}
    for fn in info.functions:
        decorator = py.autotune_decorator(fn, module.imports)
        if decorator is None:
            continue
        arguments = {name: pyautotune.Bound(expr, None, info) for position, name in enumerate(_READ)
                     if (expr := py.argument(decorator, name, position)) is not None}
        spread = _spread(decorator, info.constants)
        if spread is None:
            continue  # `**options` kgate cannot read may reset anything: trusted, as a list it cannot read is
        for name, expr in spread.items():
            arguments.setdefault(name, pyautotune.Bound(expr, None, info))
        yield from _check_kernel(source, module, fn, arguments, reported.setdefault(fn.name, set()))
    if _applied_otherwise(source):
        whole = info if info.whole else py.ParsedModule(source.tree, origin=source)
        yield from _applications(source, module, whole, reported)


def _applications(source: SourceFile, module: KernelModule | None, whole: py.ParsedModule,
                  reported: dict[str, set[tuple[int, int, str]]] | None = None) -> Iterator[Report]:
    """The findings of the autotuner applied otherwise than by a plain decorator (`module`: the rule's view of
    this file, None when it holds no atomic)."""
    project = pyautotune.Project(source.path, source.rel)
    applications = pyautotune.Applications(whole, source.path, project).find()
    reported = {} if reported is None else reported
    for application in applications:
        if application.origin is not None:
            yield from _imported_kernel(source, module or KernelModule(source, whole), project, application)
            continue
        fn = module.function(application.kernel) if module is not None else None
        if fn is not None and module is not None:
            yield from _check_kernel(source, module, fn, application.arguments,
                                     reported.setdefault(fn.name, set()),
                                     None if application.decorator else application.at)


def _imported_kernel(source: SourceFile, module: KernelModule, project: pyautotune.Project,
                     application: pyautotune.Application) -> Iterator[Report]:
    """The findings of the autotuner applied here to a kernel another module of the project defines: reported at
    the application (where the reset list goes), naming the atomic in the kernel's own file."""
    assert application.origin is not None
    data = project.data(application.origin)
    parsed = project.parsed(application.origin)
    if data is None or parsed is None:
        return
    rel = os.path.relpath(application.origin, project.root).replace(os.sep, "/")
    other = SourceFile(application.origin, rel, data)
    other.derived["pysource"] = parsed
    kernel_module = KernelModule(other, parsed)
    fn = kernel_module.function(application.kernel)
    if fn is None:
        return
    span = source.span(application.at)
    for report in _check_kernel(other, kernel_module, fn, application.arguments, set(), None, module):
        at = f"{rel}:{report.line}"
        yield dataclasses.replace(report, message=f"{report.message} (the atomic: {at})", scope="",
                                  discriminator=f"{application.kernel}|{report.discriminator}", **span)


# triton.autotune's parameters the rule reads, in their order (their positions in a call).
_READ = ("configs", "key", "prune_configs_by", "reset_to_zero", "restore_value", "pre_hook")
# A line that may apply the autotuner otherwise than as a plain `@triton.autotune(...)` decorator: a call of
# anything named *tune* (`triton.autotune(...)(k)`, `get_autotune_kernel(k, ...)`, an alias `tune(...)`).
_TUNE_CALL = re.compile(rb"tune\w*[ \t]*\(")
_NOT_A_CALL = re.compile(rb"[ \t]*(?:@|#|from |import )")


def _spread(call: ast.Call, constants: dict[str, ast.expr]) -> dict[str, ast.expr] | None:
    """The arguments the rule reads that a decorator's `**options` gives (`**KW` with `KW = dict(reset_to_zero=
    [...])` or a dict literal, directly or through a module constant); None where a spread cannot be read."""
    out: dict[str, ast.expr] = {}
    for keyword in call.keywords:
        if keyword.arg is not None:
            continue
        value = keyword.value
        if isinstance(value, ast.Name) and value.id in constants:
            value = constants[value.id]
        if isinstance(value, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                               for k in value.keys):
            out.update((k.value, v) for k, v in zip(value.keys, value.values)  # type: ignore[union-attr]
                       if k.value in _READ)  # type: ignore[union-attr]
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict" \
                and not value.args and all(k.arg is not None for k in value.keywords):
            out.update((k.arg, k.value) for k in value.keywords if k.arg in _READ)
        else:
            return None
    return out


def _applied_otherwise(source: SourceFile) -> bool:
    data = source.data
    for found in _TUNE_CALL.finditer(data):
        start = data.rfind(b"\n", 0, found.start()) + 1
        if _NOT_A_CALL.match(data, start) is None and b"#" not in data[start:found.start()]:
            return True
    return False


def _check_kernel(source: SourceFile, module: KernelModule, fn: Function, arguments: dict[str, pyautotune.Bound],
                  reported: set[tuple[int, int, str]], at: ast.AST | None = None,
                  tuner: KernelModule | None = None) -> Iterator[Report]:
    """The findings of one application of the autotuner to a kernel of `module`, given the arguments it passes
    (written in `tuner`, the module that applies it: `module` itself unless given)."""
    kernel_module, module = module, tuner or module
    hook_bound = arguments.get("pre_hook")
    if hook_bound is not None and not hook_bound.local:
        return  # a pre_hook written in another module: trusted to reset what it must
    tuning = Tuning(module)
    hook = tuning.resets(hook_bound.expr if hook_bound is not None else None)
    if hook is None:
        return  # a pre_hook kgate cannot read is trusted to reset what it must
    lists = [protected(arguments.get(name), module.constants) for name in ("reset_to_zero", "restore_value")]
    if any(found is None for found in lists):
        return  # a list we cannot read may name anything
    always = set(hook)
    sometimes: dict[str, str] = {}
    for found in lists:
        assert found is not None
        always |= found[0]
        for name, condition in found[1].items():
            sometimes.setdefault(name, condition)
    atomics = list(kernel_module.accesses(fn))
    in_place: list[tuple[Access, str]] = []
    aliased: list[tuple[ast.expr, str, str, str]] = []
    if b"store" in kernel_module.source.data:
        body = kernel_module.with_body(fn)  # the lint's reduced parse keeps the body of a kernel that names an atomic
        accessed = list(kernel_module.accesses(body, memory=True))
        in_place = in_place_writes(body, accessed)
        if kernel_module is module and kernel_module.source is source:
            aliased = [found for found in _aliased_launches(source, body, accessed)
                       if found[2] not in always and found[3] not in always]
    if not atomics and not in_place and not aliased:
        return
    configs_bound, prune_bound = arguments.get("configs"), arguments.get("prune_configs_by")
    if configs_bound is not None and single_config(configs_bound.expr, configs_bound.module):
        return  # a single config runs as it is, never benchmarked, so no run sees what another left
    configs = tuning.configs(configs_bound.expr) if configs_bound is not None and configs_bound.local else None
    configs = tuning.pruned(prune_bound.expr if prune_bound is not None and prune_bound.local else None, configs)
    fixed = Tuning(kernel_module).fixed(fn)
    module = kernel_module
    # Only an idempotent atomic needs the kernel's loads and stores: does the kernel read the buffer back?
    memory = atomics if all(a.op in ACCUMULATING for a in atomics) else list(module.accesses(fn, memory=True))
    stores: list[Access] | None = None
    for access in atomics:
        if fixed and any(truth(test, fixed) not in (None, taken) for test, taken in guards(fn.body, access.call)):
            continue  # a heuristic fixes a constexpr so that the atomic's branch never runs
        reach = reaching(fn, access.call, configs, fixed)
        if configs and not isinstance(configs, Partial) and not reach:
            continue  # no config the autotuner can run takes the atomic's branch
        if access.roots:
            targets = [r for r in access.roots if r not in always and not hooks_reset(reach, r)]
        else:
            targets = [] if always or sometimes or hooks_reset(reach, None) else ["?"]
        for target in targets:
            key = (access.call.lineno, access.call.col_offset, target)
            if key in reported or not repeats_differently(access, target, memory):
                continue
            if access.op in ACCUMULATING and not access.helper and target != "?":
                if stores is None:
                    stores = [a for a in (memory if memory is not atomics else module.accesses(fn, memory=True))
                              if a.op == "store" and not a.helper]
                if written_first(fn, access, [a for a in stores if target in a.roots]):
                    continue
            reported.add(key)
            report = _report(source, fn, access, target, sometimes.get(target), at)
            near = sorted(n for n in always | set(sometimes) if n != target and n.lower() == target.lower())
            if near and target not in sometimes:
                report = dataclasses.replace(report, message=f"{report.message} (the list names `{near[0]}`, which "
                                                             f"is not `{target}`: names are case-sensitive)")
            yield report
    done: set[str] = set()
    for store, target in in_place:
        key = (store.call.lineno, store.call.col_offset, target)
        if target in done or target in always or key in reported:
            continue
        if fixed and any(truth(test, fixed) not in (None, taken) for test, taken in guards(fn.body, store.call)):
            continue
        reach = reaching(fn, store.call, configs, fixed)
        if configs and not isinstance(configs, Partial) and not reach or hooks_reset(reach, target):
            continue
        done.add(target)
        reported.add(key)
        yield _in_place_report(source, fn, store, target, sometimes.get(target), at)
    for given, passed, read, written in aliased:
        key = (given.lineno, given.col_offset, written)
        if written in done or key in reported:
            continue
        reported.add(key)
        restored_when = sometimes.get(written) or sometimes.get(read)
        head = (f"`{passed}` is passed to autotuned `{fn.name}` as both `{read}`, which it loads, and `{written}`, "
                f"which it writes")
        consequence = ("every benchmark run reads what the previous one wrote, so the first call after a new key "
                       "returns the kernel applied several times")
        if restored_when is not None:
            yield Report(f"{head}, restored by the autotuner only when {restored_when}: otherwise {consequence}",
                         severity=Severity.WARNING, scope=fn.name, discriminator=written, **source.span(given))
        else:
            yield Report(f"{head} (in place), and neither is in restore_value: {consequence} (list `{written}` in "
                         f"restore_value)", scope=fn.name, discriminator=written, **source.span(given))


def _aliased_launches(source: SourceFile, fn: Function, accessed: list[Access]) -> Iterator[tuple[ast.expr, str, str,
                                                                                                  str]]:
    """(the written argument as the launch passes it, what it passes, the parameter the kernel loads through, the one
    it writes through) for each launch of
    the kernel in its own module that passes one tensor (the same name or attribute: `Z=z, DZ=z`) for a parameter
    the kernel only reads and one it writes: an in-place kernel made so by its caller."""
    if not launch_lines(source.text, {fn.name}):
        return
    loaded = {root for a in accessed if a.op == "load" for root in a.roots}
    written = {root for a in accessed if a.op != "load" for root in a.roots}
    if not loaded or not written:
        return
    params = [arg.arg for arg in py.parameters(fn)]
    positional = [arg.arg for arg in (*fn.args.posonlyargs, *fn.args.args)]
    launches: dict[str | None, list[ast.Call]] | None = source.derived.get("kg202_launches")
    if launches is None:
        launches = source.derived["kg202_launches"] = {}
        for node in ast.walk(source.tree):
            if isinstance(node, ast.Call):
                launches.setdefault(launched_name(node), []).append(node)
    for node in launches.get(fn.name, ()):
        given: dict[str, str] = {}
        exprs: dict[str, ast.expr] = {}
        for param in params:
            expr = passed_for(node, param, positional.index(param) if param in positional else None)
            if isinstance(expr, (ast.Name, ast.Attribute)) and (dotted := py.dotted(expr)) is not None:
                given[param], exprs[param] = dotted, expr
        for out in params:
            if out not in written or out not in given:
                continue
            read = next((p for p in params if p != out and p in loaded and p not in written
                         and given.get(p) == given[out]), None)
            if read is not None:
                yield exprs[out], given[out], read, out


def _in_place_report(source: SourceFile, fn: Function, store: Access, target: str, condition: str | None,
                     at: ast.AST | None) -> Report:
    consequence = (f"every benchmark run works on what the previous one wrote into `{target}`, so the first call "
                   f"after a new key returns the kernel applied several times")
    head = f"{store.describe} in autotuned `{fn.name}` writes back into `{target}` what it computed from `{target}`"
    if condition is not None:
        return Report(f"{head}, which the autotuner restores only when {condition}{_where(at)}: otherwise "
                      f"{consequence}", severity=Severity.WARNING, scope=fn.name, discriminator=target,
                      **source.span(store.call))
    return Report(f"{head} (in place), and `{target}` is not in restore_value{_where(at)}: {consequence} (list it "
                  f"in restore_value)", scope=fn.name, discriminator=target, **source.span(store.call))


_CONSEQUENCE = {
    "atomic_add": "every benchmark run adds into it again",
    "atomic_xor": "every benchmark run flips the same bits again",
}


def _report(source: SourceFile, fn: Function, access: Access, target: str, condition: str | None = None,
            at: ast.AST | None = None) -> Report:
    op = access.describe
    consequence = _CONSEQUENCE.get(access.op, "")
    if target == "?":
        if not consequence:
            consequence = ("the old value it returns is what the previous benchmark run left there, so runs after "
                           "the first take another path")
        message = (f"{op} in autotuned `{fn.name}` writes through a pointer the decorator never resets: "
                   f"{consequence} (list the buffer in reset_to_zero or restore_value)")
    else:
        if not consequence:
            consequence = (f"the kernel reads `{target}` back (a load or the old value an atomic returns) and finds "
                           f"what the previous benchmark run left there, since nothing in the kernel puts it back")
        if condition is not None:
            message = (f"{op} in autotuned `{fn.name}` writes into `{target}`, which the autotuner restores only when "
                       f"{condition}{_where(at)}: otherwise {consequence}")
            return Report(message, severity=Severity.WARNING, scope=fn.name, discriminator=target,
                          **source.span(access.call))
        message = (f"{op} in autotuned `{fn.name}` writes into `{target}`, which is in neither reset_to_zero nor "
                   f"restore_value{_where(at)}: {consequence}")
    return Report(message, scope=fn.name, discriminator=target, **source.span(access.call))


def _where(at: ast.AST | None) -> str:
    """Where the autotuner is applied, when not by a decorator of the kernel itself."""
    line = getattr(at, "lineno", None)
    return f" (autotune applied at line {line})" if line is not None else ""


RULE = Rule(
    code="KG202",
    name="autotune-side-effect",
    layer="python",
    severity=Severity.ERROR,
    summary="Autotuned kernel accumulates with atomics into, or rewrites in place, a buffer the autotuner does not "
            "reset",
    check=check,
    doc=__doc__ or "",
    files=("*.py",),
    prefilter=(b"atomic_", b"autotune"),  # every autotuned module: an in-place kernel has no atomic
    requires=(py.TRITON_MARKERS,),  # it reads only modules that reach Triton
    reads=frozenset({Artifact.SOURCE}),
)
