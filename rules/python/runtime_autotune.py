"""## What it does
Flags a `triton.autotune` whose `key` names a run-time argument of the
kernel: a parameter not annotated `tl.constexpr`, or a name listed in
`runtime-shape-names` (token counts, sequence lengths, batch sizes, `M`).
Every spelling of the decorator is recognised (`triton.autotune`,
`import triton as tr`, `from triton import autotune as at`,
`triton.runtime.autotuner.autotune`, ...), and keys given through a
module-level constant (`KEYS = ["M"]`, `key=KEYS`) are followed.

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
```

## Use instead
Key on what really changes the best config and takes few values: the
`tl.constexpr` model dimensions, or a bucketed shape computed by the
caller and passed as a `tl.constexpr` (e.g. the next power of two of the
token count, capped).

```python
@triton.autotune(configs=CONFIGS, key=["D"])
@triton.jit
def rmsnorm(x, w, out, n_tokens, D: tl.constexpr, BLOCK: tl.constexpr):
    ...
```

A run-time argument that takes only a handful of values in your workload
(a hidden size passed as an `int`) can be allowed by name with the
`allowed-keys` option rather than suppressed at every kernel.

## Options
- `runtime-shape-names` (list of strings): key names that are run-time
  shapes whatever their annotation (a `tl.constexpr` token count recompiles
  for every value, which is worse). Default: `M`, `n_tokens`, `N_TOKENS`,
  `num_tokens`, `NUM_TOKENS`, `total_tokens`, `TOTAL_TOKENS`, `seq_len`,
  `SEQ_LEN`, `seqlen`, `seq_length`, `max_seqlen`, `MAX_SEQLEN`, `N_CTX`,
  `batch`, `batch_size`, `BATCH`, `n_rows`, `num_rows`, `N_ROWS`.
- `extend-runtime-shape-names` (list of strings): added to the list above.
- `allowed-keys` (list of strings): key names never reported.

## References
- Triton's `triton.autotune` documentation: "a list of argument names whose
  change in value will trigger the evaluation of all provided configs".
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from kgate.collect import pysource as py
from kgate.collect.source import SourceFile
from kgate.core.findings import Severity
from kgate.core.rule import Option, Report, Rule, SourceContext

RUNTIME_SHAPE_NAMES = (
    "M", "n_tokens", "N_TOKENS", "num_tokens", "NUM_TOKENS", "total_tokens", "TOTAL_TOKENS",
    "seq_len", "SEQ_LEN", "seqlen", "seq_length", "max_seqlen", "MAX_SEQLEN", "N_CTX",
    "batch", "batch_size", "BATCH", "n_rows", "num_rows", "N_ROWS",
)


def check(source: SourceFile, ctx: SourceContext) -> Iterable[Report]:
    info = py.info(source)
    if not info.uses_triton():
        return
    imports, constants = info.imports, info.constants
    shapes = set(ctx.options["runtime-shape-names"]) | set(ctx.options["extend-runtime-shape-names"])
    allowed = set(ctx.options["allowed-keys"])
    for fn in info.functions:
        decorator = py.autotune_decorator(fn, imports)
        if decorator is None:
            continue
        params = {arg.arg: arg for arg in py.parameters(fn)}
        for name, node in py.string_items(py.argument(decorator, "key", 1), constants):
            if name in allowed:
                continue
            reason = _reason(name, params.get(name), shapes, imports)
            if reason:
                yield Report(f"autotune key {name!r} of `{fn.name}` {reason}: every new value benchmarks "
                             f"all configs again", scope=fn.name, discriminator=name, **source.span(node))


def _reason(name: str, param: ast.arg | None, shapes: set[str], imports: dict[str, str]) -> str:
    if name in shapes:
        return "is a run-time shape (runtime-shape-names)"
    if param is not None and not py.is_constexpr(param.annotation, imports):
        return "is a run-time argument (not tl.constexpr)"
    return ""


RULE = Rule(
    code="KG201",
    name="runtime-autotune",
    layer="python",
    severity=Severity.ERROR,
    summary="Triton autotune keyed on a run-time shape: re-benchmarks on every new value",
    check=check,
    doc=__doc__ or "",
    options={
        "runtime-shape-names": Option(list(RUNTIME_SHAPE_NAMES), "key names that are run-time shapes", list, str),
        "extend-runtime-shape-names": Option([], "names added to runtime-shape-names", list, str),
        "allowed-keys": Option([], "key names never reported", list, str),
    },
    files=("*.py",),
    prefilter=(b"autotune",),
)
