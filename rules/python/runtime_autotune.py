"""## What it does
Flags a `triton.autotune` whose `key` names an argument that changes with
the token count or the batch: one finding per autotuned kernel, naming
every such key.

Each key is judged by what the launch sites in the same module
(`kernel[grid](...)`, `kernel.run(...)`, `torch.library.wrap_triton(kernel)[grid](...)`,
or a local name that picks the kernel: `fn = naive_kernel` in one branch and
`fn = loop_kernel` in another, `fn = a if small else b` (nested, over several
lines, annotated), an entry of a table of kernels (`fn = {0: a, 1: b}[mode]`,
`fn = KERNELS[mode]` with a module constant), an assignment expression, or an
item of the tuple each branch gives (`fn, grid = (a, g) if small else (b,
h)`), then `fn[grid](...)`)
pass for it, or where the module launches the kernel nowhere, the launch
sites in the project's other modules that import it (`from .kernels import
fwd_kernel` in `ops.py`, or `from pkg import fwd` where `pkg/__init__.py`
passes it on as `from .kernels import fwd_kernel as fwd`; for a kernel that
is a static method of a class, `kernels.Act.forward[grid](...)` after `from
pkg import kernels`, where the package passes the class on; a kernel at
the module's top level reached through its module likewise:
`kernels.fwd_kernel[grid](...)` after `from . import kernels`,
`kn.fwd_kernel` after `import pkg.kernels as kn`, `pkg.kernels.fwd_kernel`
after `import pkg.kernels`), followed
through the launching function's
assignments and its module's own helper functions, and those it imports
by name from the project's other modules (the items of a tuple
one returns too: `y, N, T = fwd(x)`), and in an autograd function's
`backward` through what its `forward` saved on the context (`ctx.N = N`).
A shape handed on whole is read where it is taken: `b, n, h, d = shape`,
where `shape` is bound once to `x.shape` or `ctx.shape`, or is a parameter
every call passes one for, has the names written here and the tensor of the
shape. A dimension read at a variable place (`x.shape[dim]`, `x.size(dim)`)
is the dimension at each place `dim` is bound to or every call passes (`dim
= len(x.shape) + dim` keeps the same one):

- **token or batch dimension** (an error): the first dimension of a tensor
  (`x.shape[0]`, `x.size(0)`, `B` of `B, T, H, D = q.shape`), the
  sequence length of an attention tensor unpacked into four names (`T` of
  `B, T, H, D = q.shape`, `N` of `B, H, N, D = x.shape`: the middle name
  beside the heads, `H` or a name whose words say heads, before the last
  dimension, a width per item whatever its letter unless its words say a
  run-time size (`n` of `b, n, h, f = dld_q.shape`), or any name beside heads
  named by their words: `y_size` of `num_batches, num_heads, y_size,
  x_size`; `C` of `B, C, H, W` is none), the second of two names a leading
  slice of a shape is unpacked into, which ends before its last dimension
  (`T` of `B, T = x.shape[:2]`, or after the batch a letter that names no
  model dimension: `n` of `b, n = x.shape[:2]`; not `h` of `b, h`), the
  length of a tensor unpacked into three names, a letter
  between the batch first (`b`, or a name whose words say the batch, not a
  token count) and the heads or a width last (`h`, `d`, a model
  dimension by its words, or left unnamed: `_` of `b, n, _`, the tensor's
  last dimension) that names no model dimension itself (`n` of `b,
  n, h = decay.shape`; `c` of `b, c, d`, `l` of `tokens, l, d` and a word,
  `width` of `bsz, width, hidden`, are none), the
  product of a shape's sizes from the first (`math.prod(x.shape[:-1])`,
  `torch.prod(torch.tensor(shape[:-1])).item()` with `shape = x.shape`: the
  rows; not one given a start past the first, `prod(x.shape, start_dim=2)`),
  a middle dimension whose name's words say a token count
  (`seqlen` of `bsz, seqlen, _ = x.shape`) or that names the size of a
  letter read as one (`m_size` or `size_m` as `M`, of `num_batches,
  m_size, k_size = x.shape`) or that the batch's or the time steps' letter
  names (`B` of `NS, B, NH, DH = states.shape`), a middle dimension bound to
  a name that ends in that letter (`true_B = grads.shape[2]`), a stride
  that holds one of these (`q.stride(0)` of a head-major `(heads, total
  tokens, dim)` tensor: see KG108), the spatial extents (or the length) of a
  tensor laid out channels first: the names after a second name whose
  words say channels or features, or `C`, that neither their words nor
  a model letter (`D` of `B, C, L, D`) place as a model dimension (`in_height` and `in_width` of `batch,
  in_feat_dim, in_height, in_width = x.shape`, `L` of `N, C, L`, `H` and
  `W` of `N, C, H, W`), the width of a block table (`block_offsets.size(1)`,
  `_, blocks = block_tables.shape`: the blocks of the batch's longest
  sequence, where the table is not the module's own), the longest
  sequence of a step read from the object that holds the step's offsets
  (`seqlen.max_q` where the function also reads `seqlen.cu_seqlen_q`), the
  last of sequence offsets the project accumulates (`cu_seqlens[-1]` where
  `cu_seqlens = F.pad(lens.cumsum(0), (1, 0))`: the total token count) and
  the longest of the lengths between them (`torch.diff(cu_seqlens).max()`,
  `(cu_seqlens[1:] - cu_seqlens[:-1]).max()`; read from a host copy too,
  `cu_seqlens.cpu()[-1]`, `cu_seqlens.tolist()[-1]`; a sum of sizes the
  built model fixes, `self.split_sizes.cumsum(0)` or of a literal table,
  is no such offset), `x.numel()`
  or the length of x flattened (`len(x.flatten())`, `len(x.view(-1))`),
  `len(cu_seqlens)`, any dimension or stride of a tensor made with its
  sizes written out (in the launcher, or by every call of it: `cols` of
  `rows, cols = logits.shape` and `logits.stride(0)` where the caller makes
  `torch.empty((rows, kv_slots.numel()))`) whose size there is one of
  these, and likewise any dimension of a tensor laid out by a view with its
  sizes written out (`q = x.view(bsz, seqlen, heads, dim)`, `expand`,
  `reshape`; a size the view infers, `-1`, places nothing), transposed or
  permuted or not: `q.shape[1]`, or `q.size(2)` of `q.transpose(1, 2)`, is
  `seqlen`, and `q.shape[2]` the heads; and anything computed from them
  that does not bound them, through any number of assignments and helper calls (`B * T`,
  `triton.cdiv(T, 64)`, `max(1, T)`, `ceil(n_rows / sm_count)` with
  `sm_count` a parameter of the launcher, `ceil(heads * batch / programs) +
  4`): divided by anything that does not itself grow with it (a model
  dimension, a property of the device, a parameter whose name says nothing
  of the batch), it still grows with it; divided by another run-time size
  (`x.numel() // num_tokens`) it may be anything;
- **bucketed** (not reported by default): a value that takes a few values
  whatever the batch: passed through a bucketing function
  (`triton.next_power_of_2`, `bit_length`, `log2`, a function whose name
  contains `bucket`, `pow2` or `power_of_2`, or one listed in
  `bucketing-functions`), capped by `min(...)` with a bounded argument,
  divided by a constant of at least 16384, a property of the device
  (`get_device_properties(d).multi_processor_count`, `num_sms()`),
  returned by a module function
  every `return` of which is bounded (a finite table), a literal, a
  module constant, a comparison or a flag, a size the launcher refuses
  above at most 64 (`if q_len > 16: raise ...`, `assert n <= 64`) or a
  call passes only under such a bound (`attend = decode if q_len <= 16
  else prefill`, then `attend(q, q_len=q_len)`), a
  value a switch of the environment replaces by a constant unless the
  variable is set (`pages if debug else 0`: see KG108), or a batch packed to one (the
  first dimension of a tensor a caller makes with a leading one, or of the
  inputs of a function that checks their batch is 1 when `cu_seqlens` is
  given, where every call of it in the project gives it: see KG108);
  and every key of an autotuner of the project's own that rounds each
  key value with a bucketing function before it looks a tuning up,
  always or under a flag the application turns on (AutoGPTQ's
  `custom_autotune.autotune(..., nearest_power_of_two=True)`, whose
  `run` does `key = tuple(2 ** int(math.log2(x) + 0.5) for x in key)`);
- **model dimension** (not reported by default): the last dimension of a
  tensor (`x.shape[-1]`, `N` of `M, N = x.shape`), an attribute of `self`
  or of a configuration (`self.config.hidden_size`), and any dimension or
  size (`numel()`, `len`) of a tensor the built model fixes: a weight, a
  bias, a scale or their gradient by its name (`w`, `weight`, `w_q`, `dw`,
  `db`, `w_scale`, an expert layer's `w1`, `w13`), an attribute of `self`
  (a parameter or buffer of the module, a table allocated at start-up:
  `self.req_to_token.numel()`) or of an object reached from one, a
  tensor assigned once at the module's top level, `nn.Parameter(...)`,
  what a method of one returns given no run-time size (`w.t()`), and a
  local or a parameter of the launcher that only ever holds one (every
  call of the launcher in the module passes `self.hc_fn`: `hc_fn.shape[0]`
  is a model dimension), and a size the launcher asserts equal to one
  (`assert dim == bias.size(0)`), and the first dimension of a tensor made
  with its sizes written out when its first size is one of these
  (`torch.empty((num_experts,))`), or its element count when every size
  is (`torch.empty((in_features, out_features)).numel()`), and a first dimension bound to a name
  whose words say a model dimension (`num_experts = counts.shape[0]`,
  `n_heads` of `n_heads, rows, d = q.shape`, or `H` first of three names
  or more: `H, R, d = o.shape`). A stride is the product of the dimensions after
  it, and follows the token count only where one of those does
  (`x.stride(0)` of a `[T, H]` tensor is `H`; of a `[B, T, H]` one,
  `T * H`).

A parameter of the launching function is what the module's own calls of
that function pass for it, or where there are none, what the calls in the
project's other modules that import the function pass (a launcher called
from a layer or a serving backend; tests and benchmarks, which pick shapes
of their own, are not followed); a call through a local name that picks
the function (`attend = decode if short else prefill`, or any choice a
kernel is picked by) counts, and so
does a name an autograd function's module binds to its `apply` (`attend =
Fn.apply`, imported elsewhere), and a method's parameter is what its own class passes it (`self._attend(x,
bsz)`), a static or class method's what the calls through its class pass (`Op.run(x, bsz)`). Because such a verdict reads other
files, it is never answered from the lint cache.

A key no launch site places (the value is a parameter of a launcher that
nothing in the project calls, an entry point, or what a module kgate does
not follow passes) is judged by its name: `runtime-shape-names`, or a name with a word such as `tokens`,
`seq`, `seqlen`, `batch`, `bs`, `bsz`, `rows`, `ctx`, `lens`, `indices` or `spatial` in it, is a
token or batch dimension (and `m_size` is read as `M`); a name with `bucket` in it is bucketed;
`model-dim-names`, or a name with `dim`, `hidden`, `head`, `heads`, `nh` (the heads abbreviated: `NH`,
`nh`), `vocab`, `experts`, `features`, `channels` or `embed` in it, is a model
dimension. Words run together are read by their ending: `maxlen` or
`nbatch` (ending in `len`, `lens`, `seqlen`, `tokens` or `batch`) is a token
or batch dimension, `headdim`, `hdim` or `nheads` a model dimension; a
size the layer fixes (`chunk_size`, `block_size`, `page_size`,
`group_size`, `window_size`) is a model dimension; a flag (`IS_VARLEN`,
`HAS_BIAS`, `USE_CU_SEQLENS`) is not judged by the words after its flag word, nor a stride by the dimension
it names (`stride_seq`). A run-time argument (not
`tl.constexpr`, in Triton or Gluon spelling) that neither its launch sites
nor its name place is **unclassified**: not reported by default (on
projects kgate was not tuned on these keys were strides, flags and counts a
reviewer had no use for), a note with `unclassified = "note"`; a constexpr
one is the project's own setting (a block size, a flag) and is not
reported.

Every way of applying the autotuner is read: the decorator under any
import spelling (`triton.autotune`, `import triton as tr`,
`from triton import autotune as at`, `triton.runtime.autotuner.autotune`),
each of a stack of them (`@triton.autotune` over `@triton.heuristics` over
another `@triton.autotune`: each looks its own key up; a key both name is
reported once),
the call form `k = triton.autotune(...)(fn)` (or of `triton.jit(fn)`),
module-level aliases (`tune = triton.autotune`,
`functools.partial(triton.autotune, key=[...])`), an autotuner made once
and applied later (`tune = triton.autotune(configs=CONFIGS, key=[...])`,
then `k = tune(fn)`: its keys are reported where they are written), wrappers defined in the
module that pass their `key` on to `triton.autotune` or apply it
themselves, and wrappers from other modules: a decorator whose name
contains `autotune`, given a `key=` (or, as `triton.autotune` takes it, a
list of argument names as its second argument: `util.autotune(configs(),
["x_size"])`) and applied to a `@triton.jit` kernel, or one listed in
`autotune-wrappers`. Keys given through a
module-level constant (`KEYS = ["M"]`, `key=KEYS`) are followed. Configs
are read for one thing only: `triton.autotune` given exactly one config (a
list literal of one `triton.Config`, a comprehension whose every loop runs
over a literal of one value (or a name the building function binds once to
one, `block_m = [32]`, or `itertools.product` of such) and that has no
condition, a module constant
holding one that the module never changes, a name the module binds only in
the branch of an `if` on a module flag that holds `True` or `False` (`if
ENABLE_AUTOTUNING: configs = [...] else: configs = [...]` with
`ENABLE_AUTOTUNING = False`: the branch the flag takes, as the module runs
at import), or a function called without arguments, of the module or
imported from another module of the project (`from .tuning import
debug_configs`), whose every `return` hands back such a list or
comprehension, or a name it binds once to one) runs it as it is, never looking the key up or
benchmarking, so its key is not reported. Anything that may hold more (`+`,
a comprehension over several values or with a condition, a starred element,
a builder given arguments) is,
and so is a constant the module gives to a call (`add_defaults(CONFIGS)`)
or changes in any of its functions, and any list of a module that reaches
an autotuner's `.configs` (`kernel.configs = get_configs()` replaces it).
Triton reached through the project's own module (`from pkg.triton_utils
import tl, triton`, `from .utils import autotune, jit`, `@tu.triton.jit`
after `import pkg.triton_utils as tu`) is Triton, as if imported directly.

The autotuned kernels of tests and benchmarks (modules in a `test`,
`tests`, `bench` or `benchmark(s)` folder, or named `test_*.py`,
`*_test.py`, `conftest.py`, `bench_*.py`) are not judged, as KG108 judges
none of their launches: they tune a kernel of their own over the shapes
they choose, to check or time it, and nothing ships it.

## Why is this bad?
The autotuner caches its choice per distinct value of the key. A key that
follows the number of tokens takes a new value on almost every training
step or serving batch, and each new value benchmarks every config again:
hundreds of milliseconds of compiling and timing in the middle of a step,
repeated for as long as new lengths keep arriving. The kernel works; it is
just silently slow and noisy to profile.

## Example
```python
@triton.autotune(configs=CONFIGS, key=["n_tokens", "D"])
@triton.jit
def rmsnorm(x, w, out, n_tokens, D: tl.constexpr, BLOCK: tl.constexpr):
    ...

def launch(x, w, out):
    n_tokens, D = x.shape
    rmsnorm[(n_tokens,)](x, w, out, n_tokens, D)
```

## Use instead
Key on what really changes the best config and takes few values: the
model dimensions, or the token count bucketed where the kernel is
launched (here to the next power of two, capped).

```python
@triton.autotune(configs=CONFIGS, key=["TOKENS_BUCKET", "D"])
@triton.jit
def rmsnorm(x, w, out, n_tokens, TOKENS_BUCKET, D: tl.constexpr, BLOCK: tl.constexpr):
    ...

def launch(x, w, out):
    n_tokens, D = x.shape
    bucket = min(triton.next_power_of_2(n_tokens), 8192)
    rmsnorm[(n_tokens,)](x, w, out, n_tokens, bucket, D)
```

A bucketing function of the project's own, imported from another module,
is named in `bucketing-functions`; a run-time argument that takes only a
handful of values in your workload can be allowed by name with
`allowed-keys` rather than suppressed at every kernel.

## Options
- `runtime-shape-names` (list of strings): key names that follow the
  token count or batch when no launch site says otherwise. Default: `M`,
  `T`, `n_tokens`, `N_TOKENS`, `num_tokens`, `NUM_TOKENS`,
  `total_tokens`, `TOTAL_TOKENS`, `seq_len`, `SEQ_LEN`, `seqlen`,
  `seq_length`, `max_seqlen`, `MAX_SEQLEN`, `N_CTX`, `batch`,
  `batch_size`, `BATCH`, `bs`, `BS`, `bsz`, `n_rows`, `num_rows`, `N_ROWS`.
- `extend-runtime-shape-names` (list of strings): added to the list above.
- `model-dim-names` (list of strings): key names that are model
  dimensions when no launch site says otherwise. Default: `D`, `H`, `K`,
  `V`, `E`, `G`, `HQ`, `HK`, `HV`, `dim`, `hidden_dim`, `hidden_size`,
  `head_dim`, `num_heads`, `d_model`, `vocab_size`, `intermediate_size`,
  `num_experts`.
- `extend-model-dim-names` (list of strings): added to the list above.
- `bucketing-functions` (list of strings): the project's functions whose
  result takes few values, by name (`snap`) or dotted through the
  imports (`mypkg.tuning.snap`).
- `autotune-wrappers` (list of strings): the project's decorators that
  forward to `triton.autotune` with the same `configs, key` arguments, by
  name or dotted; a module that uses one is read even if it never spells
  `autotune`.
- `allowed-keys` (list of strings): key names never reported.
- `model-dims`, `bucketed`, `unclassified` (`"error"`, `"warning"`,
  `"note"` or `"off"`): the severity of a key of that class. Defaults:
  `"off"` for all three. A finding takes the most severe of its keys; a
  token or batch dimension has the rule's severity.

## References
- Triton's `triton.autotune` documentation: "a list of argument names whose
  change in value will trigger the evaluation of all provided configs".
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from kgate.collect import pyautotune, pyconfigs, pyrounding
from kgate.collect import pysource as py
from kgate.collect.pylaunch import BOUNDED, MODEL, RUNTIME, UNKNOWN, Launches, Names, Verdict, worst
from kgate.collect.pyproject import Modules, checks_kernels, modules, read_ahead
from kgate.collect.source import SourceFile
from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import Option, Report, Rule, SourceContext

RUNTIME_SHAPE_NAMES = (
    "M", "T", "n_tokens", "N_TOKENS", "num_tokens", "NUM_TOKENS", "total_tokens", "TOTAL_TOKENS",
    "seq_len", "SEQ_LEN", "seqlen", "seq_length", "max_seqlen", "MAX_SEQLEN", "N_CTX",
    "batch", "batch_size", "BATCH", "bs", "BS", "bsz", "n_rows", "num_rows", "N_ROWS",
)
MODEL_DIM_NAMES = (
    "D", "H", "K", "V", "E", "G", "HQ", "HK", "HV", "dim", "hidden_dim", "hidden_size", "head_dim", "num_heads",
    "d_model", "vocab_size", "intermediate_size", "num_experts",
)
LEVELS = ("error", "warning", "note", "off")
# The order keys are named in a finding, most serious first, and how each class is described.
_CLASSES = ((RUNTIME, "runtime", "change{v} with the token count or batch"),
            (UNKNOWN, "unclassified", "{are} {a}run-time argument{n} that kgate cannot place"),
            (MODEL, "model-dims", "{are} {a}model dimension{n}"),
            (BOUNDED, "bucketed", "{are} bucketed"))


def check(source: SourceFile, ctx: SourceContext) -> Iterable[Report]:
    if checks_kernels(source.rel):
        return  # a test's or a benchmark's own kernel, tuned over the shapes it picks: nothing ships it
    info = py.info(source)
    if not info.uses_triton():
        return
    options = ctx.options
    tuned = pyautotune.tuned_kernels(info, frozenset(options["autotune-wrappers"]), source.lines)
    allowed = set(options["allowed-keys"])
    tuned = [t for t in tuned if any(name not in allowed for name, _node in t.keys)]
    if not tuned:
        return
    names = Names(set(options["runtime-shape-names"]) | set(options["extend-runtime-shape-names"]),
                  set(options["model-dim-names"]) | set(options["extend-model-dim-names"]))
    project = modules(ctx.shared, source.path, source.rel)
    launches = Launches(source, info, {t.launched for t in tuned}, {t.kernel for t in tuned if t.fn is None},
                        names, frozenset(options["bucketing-functions"]), project)
    levels = {"runtime": "", **{name: options[name] for _cls, name, _text in _CLASSES[1:]}}
    judged: set[tuple[str, str]] = set()  # (kernel, key): stacked autotuners keyed on one name are reported once
    for t in tuned:
        fn = t.fn or launches.definitions.get(t.kernel)
        if t.needs_jit and (fn is None or not py.is_kernel(fn, info.imports)):
            continue
        if _one_config(t, info, lambda name: _imported_builder(name, source, project)):
            continue  # the autotuner runs a single config as it is: no key is looked up, nothing is benchmarked
        owner = _owner(fn, info) if t.fn is not None else ""
        offending: list[tuple[str, ast.AST, Verdict, str]] = []
        rounded = _rounded(t, info, source)
        for name, node in t.keys:
            if name in allowed or t.fn is not None and (t.kernel, name) in judged:
                continue
            if t.fn is not None:  # a decorator: the stack on one definition
                judged.add((t.kernel, name))
            verdict = rounded or _key(name, fn, t.launched, launches, names, info.imports, owner)
            if verdict is None:
                continue
            level = levels[next(label for cls, label, _text in _CLASSES if cls == verdict.cls)]
            if level != "off":
                offending.append((name, node, verdict, level))
        if offending:
            yield _report(source, t, offending)


def _owner(fn: py.Function | None, info: py.ParsedModule) -> str:
    """The top-level class a kernel is a static method of (launched as `Relu.forward[grid](...)`, or from another
    module as `kernels.Relu.forward[grid](...)`); "" for a kernel at the module's top level."""
    if fn is None or fn in info.tree.body:
        return ""
    for stmt in info.tree.body:
        if isinstance(stmt, ast.ClassDef) and any(member is fn for member in stmt.body) and any(
                (py.dotted(d) or "").rsplit(".", 1)[-1] == "staticmethod" for d in fn.decorator_list):
            return stmt.name
    return ""


def _one_config(t: pyautotune.Tuned, info: py.ParsedModule, imported: pyconfigs.Builders) -> bool:
    """Whether `triton.autotune` is given exactly one config where it is applied (`kgate.collect.pyconfigs`)."""
    at = t.at
    if not (isinstance(at, ast.Call) and py.qualified(at.func, info.imports) in py.AUTOTUNE):
        return False
    return pyconfigs.single_config(py.argument(at, "configs", 0), info, imported=imported)


def _imported_builder(name: str, source: SourceFile, project: Modules) -> tuple[py.Function, py.ParsedModule] | None:
    """A top-level function of the project's other modules that this one imports by name (`from .utils import
    get_debug_configs`), with the reading of its module: a config builder read where it is defined."""
    found = project.imported(source, {name}).get(name)
    if found is None:
        return None
    path, defined = found
    other, tree = project.source(path), project.tree(path)
    if other is None or tree is None:
        return None
    fn = next((stmt for stmt in tree.body if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
               and stmt.name == defined), None)
    return (fn, py.info(other)) if fn is not None else None


def _rounded(t: pyautotune.Tuned, info: py.ParsedModule, source: SourceFile) -> Verdict | None:
    """Bucketed, for every key, where the autotuner is the project's own and rounds each key value before it looks
    a tuning up (`kgate.collect.pyrounding`); None otherwise."""
    call = pyrounding.applied_call(t.at)
    if call is None:
        return None
    whole = info if info.whole else py.ParsedModule(py.whole_tree(source), origin=source)
    if not pyrounding.rounds_keys(call, whole, source.path, source.rel):
        return None
    return Verdict(BOUNDED, "rounded by the project's autotuner")


def _key(name: str, fn: py.Function | None, launched: str, launches: Launches, names: Names,
         imports: dict[str, str], owner: str = "") -> Verdict | None:
    """What a key does at run time; None when it is not to be judged (not a parameter, or a tl.constexpr that
    nothing places)."""
    params = py.parameters(fn) if fn is not None else None
    param = next((p for p in params if p.arg == name), None) if params is not None else None
    if params is not None and param is None:
        return None  # not a parameter of the kernel: Triton rejects it, not our concern
    position = None
    if fn is not None and param is not None:
        positional = [*fn.args.posonlyargs, *fn.args.args]
        position = positional.index(param) if param in positional else None
    verdicts = launches.argument(launched, name, position, _has_default(fn, name))
    if not verdicts:  # launched from the project's other modules only
        verdicts = [v for _expr, v in launches.passed_elsewhere(launched, name, position, _has_default(fn, name),
                                                                owner)]
    verdict = worst(verdicts)
    if verdict.cls == UNKNOWN:
        by_name = names.of(name)
        if by_name != UNKNOWN:
            return Verdict(by_name, "by its name")
        if param is None or py.is_constexpr(param.annotation, imports):
            return None  # a tl.constexpr the project sets itself (a block size, a flag)
    return verdict


def _has_default(fn: py.Function | None, name: str) -> bool:
    if fn is None:
        return False
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    with_default = positional[len(positional) - len(args.defaults):] if args.defaults else []
    return any(a.arg == name for a in with_default) or any(
        a.arg == name and d is not None for a, d in zip(args.kwonlyargs, args.kw_defaults))


def _report(source: SourceFile, t: pyautotune.Tuned, offending: list[tuple[str, ast.AST, Verdict, str]]) -> Report:
    groups = []
    for cls, _label, text in _CLASSES:
        keys = [(name, verdict) for name, _node, verdict, _level in offending if verdict.cls == cls]
        if not keys:
            continue
        many = len(keys) > 1
        named = ", ".join(f"{name!r}" + (f" ({why})" if (why := str(verdict.why)) and why != name else "")
                          for name, verdict in keys)
        groups.append(f"{named} " + text.format(v="" if many else "s", n="s" if many else "",
                                                are="are" if many else "is", a="" if many else "a "))
    severity = min((Severity(level) for _n, _node, _v, level in offending if level), key=lambda s: s.rank,
                   default=None)
    if any(not level for _n, _node, _v, level in offending):
        severity = None  # a run-time key: the rule's own (configurable) severity
    first = source.span(offending[0][1])
    last = source.span(offending[-1][1])
    return Report(f"autotune key of `{t.kernel}`: {'; '.join(groups)}: every new value benchmarks all configs "
                  f"again", severity=severity, scope=t.kernel,
                  discriminator=",".join(name for name, _node, _v, _level in offending),
                  line=first["line"], col=first["col"], end_line=last["end_line"], end_col=last["end_col"])


def _level(help: str, default: str) -> Option:
    return Option(default, help, str, choices=LEVELS)


RULE = Rule(
    code="KG201",
    name="runtime-autotune",
    layer="python",
    severity=Severity.ERROR,
    summary="Triton autotune keyed on a run-time shape: re-benchmarks on every new value",
    check=check,
    doc=__doc__ or "",
    options={
        "runtime-shape-names": Option(list(RUNTIME_SHAPE_NAMES), "key names that follow the token count or batch",
                                      list, str),
        "extend-runtime-shape-names": Option([], "names added to runtime-shape-names", list, str),
        "model-dim-names": Option(list(MODEL_DIM_NAMES), "key names that are model dimensions", list, str),
        "extend-model-dim-names": Option([], "names added to model-dim-names", list, str),
        "bucketing-functions": Option([], "the project's functions whose result takes few values", list, str),
        "autotune-wrappers": Option([], "the project's decorators that forward to triton.autotune", list, str),
        "allowed-keys": Option([], "key names never reported", list, str),
        "unclassified": _level("severity of a run-time key no launch site or name places", "off"),
        "model-dims": _level("severity of a key that is a model dimension", "off"),
        "bucketed": _level("severity of a key bucketed at its launch sites", "off"),
    },
    files=("*.py",),
    prefilter=(b"autotune",),
    requires=(py.TRITON_MARKERS,),  # it reads only modules that reach Triton
    read_ahead=read_ahead,
    prefilter_options=("autotune-wrappers",),
    reads=frozenset({Artifact.SOURCE}),
)
