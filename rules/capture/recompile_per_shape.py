"""## What it does
Reads the captured specialisations of each Triton kernel (`kgate capture`)
and reports a `tl.constexpr` integer that takes several values across
launches that are otherwise the same specialisation (same argument types,
same other constexprs, same options; divisibility aside, since it moves with
the shape too), where the values are not all powers of two: a constexpr that
follows a run-time shape, such as `rows_per_program = ceil(n_rows / sm_count)`
or a batch size passed as `bs: tl.constexpr`.

Constexprs set by the kernel's autotune configs are left alone (they vary by
design), and so are the arguments its autotuner is keyed on (`key=["N",
"K"]`): every new value of a key is tuned again by design, and whether the
values keep arriving (a token count) or are the model's few (a weight's
`N` and `K`) is what `runtime-autotune` (KG201) judges from the source; and so
are powers of two (`BLOCK = next_power_of_2(n)` compiles at
most a few dozen variants over all shapes).

The same rule has a second source of evidence, read by `kgate lint` before
anything runs: a launch site (`kernel[grid](...)`, `kernel.run(...)`, or through a local
name that picks the kernel: `fn = kernel` in a branch, `fn = a if small else
b`, nested or over several lines, annotated, `fn = {0: a, 1: b}[mode]` (a
module constant's table too), `(fn := a if small else b)`, `fn, grid = (a,
g) if small else (b, h)`, then `fn[grid](...)`) in the `@triton.jit` kernel's own module, or in a module of the project that
imports it (`from .kernels import fwd_kernel`, then `fwd_kernel[grid](...)`)
or reaches it through its module (`kernels.fwd_kernel[grid](...)` after
`from . import kernels`, `kn.fwd_kernel` after `import pkg.kernels as kn`,
`pkg.kernels.fwd_kernel` after `import pkg.kernels`),
that passes, for one of its `tl.constexpr` parameters, a value that follows
the token count or the batch is reported at that argument. The value is
followed through the launching function's assignments, its module's helper
functions and those it imports from the project's other modules (`from
.sizes import next_multiple_of`), and the calls of the launching function (the module's own, or
where it has none, those of the project's other modules that import it,
and theirs in turn up to two modules away from the launcher: a launcher
called from a layer, the layer from a serving backend; a call through a
local name that picks the launcher, `attend = decode if short else
prefill` or any of the choices above, then `attend(q, bsz=bsz)`, counts, and so does a name the
autograd function's module binds to its `apply`, `attend = Fn.apply`,
called there or in the modules that import it; a method's are the calls
its own class makes on the instance, `self._attend(x, bsz)`, and a static or
class method's those made through its class, `Op.run(x, bsz)`, or by the
class's own methods), through the items
of a tuple a helper returns (`y, N, T = fwd(x)`) and through what an
autograd function's `forward` saves on its context for `backward`
(`ctx.N = N`, then `bwd(dy, ctx.N)`), through a shape handed on whole
(`b, n, h, d = shape`, where every call passes `shape = ctx.shape` or
`x.shape`: the names written here, the tensor of the shape) and through the
places a variable index takes (`x.shape[dim]`, where every call passes
`dim`; `dim = len(x.shape) + dim` keeps the same one), and classed as KG201
classes autotune keys: the first dimension of a tensor (`x.shape[0]`,
`B` of `B, T, H = q.shape`), the sequence length of an attention tensor
unpacked into four names (`N` of `B, H, N, D = x.shape`, `T` of `B, T, H,
D = q.shape`, `y_size` of `num_batches, num_heads, y_size, x_size`, `S` of
`B, NH, S, DHQK`, the heads' name abbreviated, `n` of
`b, n, h, f`: the last a width per item whatever its letter), the second of
two names a leading slice of a shape is unpacked into (`T` of `B, T =
x.shape[:2]`, `n` of `b, n = x.shape[:2]`; not `h` of `b, h`), the
length of a tensor unpacked into three names, a letter between the batch
and the heads or a width (`n` of `b, n, h = decay.shape`, or of `b, n, _`
with the width unnamed; not `l` of
`tokens, l, d`, tokens first, nor a word, `width` of `bsz, width, hidden`), the product of a shape's sizes
from the first (`torch.prod(torch.tensor(x.shape[:-1])).item()`, the rows), a
middle dimension whose name's words say a token count (`seqlen` of `bsz,
seqlen, _ = x.shape`) or that the batch's or the time steps' letter names
(`B` of `NS, B, NH, DH = states.shape`, `T` of `_, T, G, _, _ = x.shape`),
a middle dimension bound to a name that ends in that letter (`true_B =
grads.shape[2]`), the spatial extents after a channels dimension
(`H` and `W` of `N, C, H, W = x.shape`, `in_height` of `batch,
in_feat_dim, in_height, in_width`), the width of a block table
(`block_offsets.size(1)`, `_, blocks = block_tables.shape`: the blocks of
the batch's longest sequence; a table of the module's own, allocated at
start-up, is a model dimension; the last dimension of block indices whose
third dimension the launcher reads, `kv_block_indices.stride(2)`, is how
many blocks a query selects, not a table's width), the longest sequence of a step read from
the object that holds the step's sequence offsets (`seqlen.max_q` where
the caller also passes `seqlen.cu_seqlen_q`), the last of sequence offsets
the project accumulates (`cu_seqlens[-1]` where `cu_seqlens = F.pad(lens.cumsum(0), (1, 0))`) and the
longest of the lengths between them (`torch.diff(cu_seqlens).max()`, computed by the layer and passed
down or read in the launcher; a host copy of the offsets holds them too: `cu_seqlens.cpu()`, `.tolist()`;
a sum of sizes the built model fixes, `self.split_sizes.cumsum(0)` or of a literal table, is no such offset),
`x.numel()`, the strides
that hold one of these (`q.stride(0)` of a head-major `(heads, total
tokens, dim)` tensor, read where the launcher unpacks it or, for a
parameter, where the calls of the launcher do, through `q_stride =
q.stride()` then `q_stride[0]` and through a tensor made like another, `o
= torch.empty_like(q)`; the keys, values, output and gradients of an
attention call, `k`, `v`, `o`, `do`, `dq`, `dk` and `dv`, are read as laid
out like the `q` beside them where nothing else places them),
every dimension and stride of a tensor made with its sizes written out, or laid out by a view so
(`q = x.view(bsz, seqlen, heads, dim)`, transposed or permuted or not: `q.shape[1]`, `q.size(2)` of
`q.transpose(1, 2)`, or `T = q.shape[1]` passed down by the layer; a size the view infers, `-1`, places
nothing), in the launcher or by every
caller of it (`rows, cols = logits.shape`, `logits.stride(0)` where the caller makes `logits =
torch.empty((rows, kv_slots.numel()))`: the size written there; over a weight's rows, `torch.empty((n,
lm_head.shape[0]))`, a model dimension), and anything
computed from them that does not bound them (`B * T`, `ceil(n_rows / sm_count)` even with
`sm_count` a parameter of the launcher, `ceil(heads * batch / programs) +
4`); a value bucketed to a power of two, a constant, a property of the
device or a model dimension is fine, and so is a size the launcher
refuses above at most 64 (`if q_len > 16: raise ...`) or that a call
passes only under such a bound (`attend = decode if q_len <= 16 else
prefill`, then `attend(q, q_len=q_len)`: for `decode`), or the first dimension of a tensor every call of
the launcher refuses above such a bound first (`M = logits.shape[0]`, then `if M > 16: raise ...`, then
`route_small(logits)`), and a value a switch of the
environment replaces by a constant unless the variable is set (`pages if
debug else 0` with `debug = os.environ.get("X_DEBUG", "0") != "0"`, read as
a process that sets nothing reads it: a debug bound is 0 in production; a
switch on unless the environment turns it off passes the size), and the dimensions of a tensor the
built model fixes are model dimensions (a weight, a bias or a scale,
numbered as an expert layer's `w1` and `w13` are; a pool by its name,
`state_pool` or `kv_pool`, whose slots the server allocates at start-up,
not `pooled`; a parameter, a buffer
or a start-up table of the module, or an attribute of an object reached
from one, such as `cache.conv[0]` after `cache =
self.pool.layer_cache(layer.layer_id)`; such as
`hc_fn.shape[0]` where every call passes `self.hc_fn`, or
`self.req_to_token.numel()`, however the caller picks it: an entry of
a start-up tuple of pools, `self.kv_cache[0]` or a name unpacked from
it, transposed or chosen by a conditional, an item a method of the
module's class returns from one (`_, conv, _ = self._layer_state(i)`), an
entry of a dict the module keeps by key (`self.scratch[layer_id]` where the
class sets `self.scratch = {}`), or an attribute a weight carries
(`getattr(w13, "packed", None)`); rows gathered from it by an
index tensor are not); the row stride of a `[T, H]` tensor; a size
the launcher asserts equal to one, such as `dim` of `dim, seqlen = x.shape`
under `assert (dim, width) == weight.shape`; a first dimension the
launcher names a model dimension, `n_heads` of `n_heads, rows, d =
q.shape` (a head-major layout) or `num_experts = counts.shape[0]`, by
the words of the name, as KG201 reads a name, or `H` first of three names
or more, `H, R, d = o.shape`); the first dimension of a
tensor made with its sizes written out, which is its first size
(`torch.empty((w13.size(0),))`, `torch.empty((self.world_size, n, d))`:
a model dimension; `x.new_empty(x.shape[0], d)`: the tokens), and its
element count, the worst of its sizes where each is placed; and a batch packed to one:
the first dimension of a tensor a caller makes with a leading one
(`q.unsqueeze(0)`, `x.view(1, n, d)`), or of the inputs of a function
that checks their batch is 1 when sequence offsets are given (`if
cu_seqlens is not None and q.shape[0] != 1: raise ...`), or of a tensor
made like one of these (`torch.empty_like(g)`), where every call
of it in the project passes offsets that are not `None` (an attribute,
an index into one, a parameter typed a tensor that cannot be `None`
(`query_start_loc: torch.Tensor`, as a method of a serving backend
takes it), or a parameter every call passes so in turn, through
`Fn.apply` to an autograd function's `forward` too, and through the
modules that call the check up to two modules away from the
launcher: a check in the operator's module, called by a layer or a
backend of its own); a caller that leaves
them out or passes `None`, or a function no call of the project reaches
(an API whose users may pass a padded batch), leaves it the batch. A name
alone places nothing here (a parameter of the launcher that nothing in
the project calls, `self.n_rows`): only the captures can tell what it
takes. The size of one row of a tensor (`pool[0].numel()`, its
dimensions after the first) is not placed either. Constexprs the launch does not pass
(set by autotune configs or `triton.heuristics`) are never judged. Tests
and benchmarks (modules in a `test`, `tests`, `bench` or `benchmark(s)`
folder, or named `test_*.py`, `*_test.py`, `conftest.py`, `bench_*.py`)
are not read for it, nor followed as callers: they run their reference
kernels on shapes of their own choosing, each compiled once, and nothing
ships them.

## Why is this bad?
Every new value of a constexpr is a new compile: tens to hundreds of
milliseconds of Triton front end and ptxas in the middle of a training or
serving step, once per new shape, on every rank, and a kernel cache that
grows without bound. With variable sequence lengths it compiles on most
steps. It passes every test that uses one or two shapes.

## Example
```python
rows_per_program = math.ceil(n_rows / sm_count)
_layer_norm_backward_kernel[(sm_count,)](..., n_rows, n_cols, rows_per_program=rows_per_program,
                                         BLOCK_SIZE=BLOCK_SIZE)
# with  rows_per_program: tl.constexpr  in the kernel's parameters
```

## Use instead
Pass the value as a run-time argument (drop `tl.constexpr`); the loop bound
does not need to be known at compile time. Where it must be a constexpr,
round it to a power of two, or bucket it.

## Options
- `min_values` (integer, default 2): how many distinct values a constexpr
  must take before it is reported (captures only).
- `ignore` (list of strings, default []): constexpr names never reported,
  by either source (an enum-like integer that is not a shape).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Iterator
from typing import Any

from kgate.collect import pysource as py
from kgate.collect.pylaunch import RUNTIME, UNKNOWN, Launches, Names
from kgate.collect.pyproject import Modules, checks_kernels, modules, read_ahead
from kgate.collect.source import SourceFile
from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import CaptureContext, CapturedKernel, Option, Report, Rule, SourceContext


def _power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def check(kernel: CapturedKernel, ctx: CaptureContext) -> Iterable[Report]:
    ignored = set(ctx.options["ignore"]) | set(kernel.tuned) | set(kernel.keys)
    values: dict[str, dict[str, set[int]]] = {}  # constexpr -> rest of the specialisation -> its values
    for spec in kernel.specs:
        for name, value in spec.constexprs.items():
            if name in ignored or isinstance(value, bool) or not isinstance(value, int):
                continue
            rest: list[Any] = [spec.signature, sorted(spec.equal_to_1), sorted(spec.none), spec.options,
                               {k: v for k, v in spec.constexprs.items() if k != name}]
            values.setdefault(name, {}).setdefault(json.dumps(rest, sort_keys=True), set()).add(value)
    for name in sorted(values):
        taken = max(values[name].values(), key=lambda found: (len(found), sorted(found)))
        if len(taken) < ctx.options["min_values"] or all(_power_of_two(v) for v in taken):
            continue
        shown = ", ".join(str(v) for v in sorted(taken)[:6]) + (", ..." if len(taken) > 6 else "")
        yield Report(f"constexpr `{name}` took {len(taken)} values ({shown}) in captured launches that are "
                     f"otherwise the same specialisation: it follows a run-time shape, so every new value compiles "
                     f"`{kernel.kernel.split(':')[-1]}` again; pass it as a run-time argument",
                     discriminator=name)


def source_check(source: SourceFile, ctx: SourceContext) -> Iterable[Report]:
    """`kgate lint`: a launch site that passes a token or batch dimension for a `tl.constexpr` parameter of a kernel of
    the module, or of a kernel it imports from another module of the project (kgate.collect.pylaunch reads the value,
    as KG201 reads autotune keys)."""
    if checks_kernels(source.rel):
        return  # a test's or a benchmark's reference kernel: each shape it picks compiles once, nothing ships it
    project = modules(ctx.shared, source.path, source.rel)
    launched = project.launched(source)
    if b"constexpr" not in source.data and not launched:
        return  # it defines no constexpr and launches nothing it imports
    info = py.info(source)
    ignored = set(ctx.options["ignore"])
    own = {fn.name: (fn.name, constexprs) for fn in info.functions if py.is_kernel(fn, info.imports)
           if (constexprs := _constexprs(fn, info.imports, ignored))} \
        if b"constexpr" in source.data and info.uses_triton() else {}
    kernels = {**_imported_kernels(source, project, ignored, launched - set(own)), **own}
    if kernels:
        launches = Launches(source, info, set(kernels), set(own), _EVIDENCE_ONLY, frozenset(), project,
                            runtime_only=True)  # only a token count is reported
        yield from _reports(source, launches, kernels)


def _constexprs(fn: py.Function, imports: dict[str, str], ignored: set[str]) -> list[tuple[str, int | None, bool]]:
    """(name, position, has a default) of each `tl.constexpr` parameter of a kernel, those ignored left out."""
    positional = [*fn.args.posonlyargs, *fn.args.args]
    defaults = {a.arg for a, d in zip(positional[len(positional) - len(fn.args.defaults):], fn.args.defaults)}
    defaults |= {a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None}
    return [(p.arg, positional.index(p) if p in positional else None, p.arg in defaults)
            for p in py.parameters(fn) if py.is_constexpr(p.annotation, imports) and p.arg not in ignored]


def _imported_kernels(source: SourceFile, project: Modules, ignored: set[str],
                      launched: set[str]) -> dict[str, tuple[str, list[tuple[str, int | None, bool]]]]:
    """The kernels of the project's other modules that this module imports and launches (`from .kernels import
    fwd_kernel as fwd`, then `fwd[grid](...)`; `launched`: the names it imports and launches): the name they have
    here -> their own name and constexprs."""
    out = {}
    for name, found in project.imported(source, launched).items():
        kernel = project.kernel(*found)
        if kernel is not None and (constexprs := _constexprs(kernel[0], kernel[1], ignored)):
            out[name] = (found[1], constexprs)
    return out


def _reports(source: SourceFile, launches: Launches,
             kernels: dict[str, tuple[str, list[tuple[str, int | None, bool]]]]) -> Iterator[Report]:
    """A report at each argument a launch passes that follows the token count for a constexpr (`kernels`: the name
    launched -> the kernel's own name and constexprs)."""
    seen: set[tuple[int, int]] = set()
    for launched, (kernel, constexprs) in kernels.items():
        for name, position, default in constexprs:
            for expr, verdict in launches.passed(launched, name, position, default):
                if expr is None or verdict.cls != RUNTIME:
                    continue
                span = source.span(expr)
                if (span["line"], span["col"]) in seen:
                    continue  # one `**kwargs` dict spread into two launches
                seen.add((span["line"], span["col"]))
                why = str(verdict.why) or ast.unparse(expr)
                yield Report(f"constexpr `{name}` of `{kernel}` is passed `{why}`, which follows the token count or "
                             f"batch: every new value compiles `{kernel}` again; pass it as a run-time argument",
                             scope=kernel, line=span["line"], col=span["col"],
                             end_line=span["end_line"], end_col=span["end_col"])


class _Evidence(Names):
    """Only what the launch site shows: a name alone (a parameter of the launcher, `self.n_rows`) places
    nothing, so a value is reported only where it is computed from a tensor's shape in the module."""

    def of(self, name: str) -> int:
        return UNKNOWN


_EVIDENCE_ONLY = _Evidence(set(), set())


RULE = Rule(
    code="KG108",
    name="recompile-per-shape",
    layer="capture",
    severity=Severity.WARNING,
    summary="A constexpr that follows a run-time shape: one compile per new shape",
    check=check,
    doc=__doc__ or "",
    options={
        "min_values": Option(2, "distinct values before a constexpr is reported", int, minimum=2),
        "ignore": Option([], "constexpr names never reported", list, items=str),
    },
    files=("*.py",),
    # a kernel's parameters, or a launch (of a kernel another module defines). Nothing is required of a module
    # beyond that: one that launches a kernel it imports need not spell `triton` (`from .kernels import fwd`, then
    # `fwd[(B,)](x, B)`); its own kernels are read only where it reaches Triton (`source_check`).
    prefilter=(b"constexpr", b"]("),
    source_check=source_check,
    read_ahead=read_ahead,
    reads=frozenset({Artifact.CAPTURE, Artifact.SOURCE}),
)
