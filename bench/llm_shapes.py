"""Launch real Triton ops at LLM shapes: the command `kgate capture` records (and `--verify` checks) in trials.

    kgate capture -- python bench/llm_shapes.py --liger PATH/TO/Liger-Kernel/src [--device cuda]
    kgate capture --verify -- python bench/llm_shapes.py --liger ... --device cuda      (on a GPU)

Liger-Kernel (github.com/linkedin/Liger-Kernel, not part of kgate: pass its `src` folder) forward and
backward at 4096 and 4097 tokens, hidden 4096, vocabulary 128256, in bf16 and fp32; then kgate's own
bundled GEMM (BM=BN=128, BK=64, 8 warps, 3 stages) at M=N=K=4096 and 4001, aligned and not. On a machine
without a GPU, run it with `--device cpu`: the launches are bound, not run (their outputs are never read).
An op that fails (a shape a kernel does not support) is named on stderr and skipped.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

TOKENS = (4096, 4097)
HIDDEN = 4096
VOCAB = 128256


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--liger", type=Path, help="Liger-Kernel's src folder")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--tokens", type=int, nargs="*", default=list(TOKENS))
    args = parser.parse_args()
    import torch

    failed = 0
    if args.liger:
        sys.path.insert(0, str(args.liger.resolve()))
        for name, op in liger_ops(torch, args.device, args.tokens):
            failed += run(name, op)
    for size in (4096, 4001):
        failed += run(f"bundled gemm {size}", lambda s=size: bundled_gemm(torch, args.device, s))
    if args.device == "cuda":
        torch.cuda.synchronize()
    print(f"llm_shapes: done, {failed} op(s) failed", file=sys.stderr)


def run(name: str, op: Callable[[], object]) -> int:
    try:
        op()
    except Exception as exc:  # noqa: BLE001 - one op that does not fit does not stop the trial
        print(f"llm_shapes: {name}: {type(exc).__name__}: {str(exc)[:160]}", file=sys.stderr)
        if "--trace" in sys.argv:
            traceback.print_exc()
        return 1
    return 0


def bundled_gemm(torch: object, device: str, size: int) -> object:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this repository's kernels/, as the project
    from kernels.gemm import matmul

    a = torch.randn(size, size, dtype=torch.bfloat16, device=device)  # type: ignore[attr-defined]
    b = torch.randn(size, size, dtype=torch.bfloat16, device=device)  # type: ignore[attr-defined]
    return matmul(a, b)


def liger_ops(torch: object, device: str, tokens: list[int]) -> list[tuple[str, Callable[[], object]]]:
    from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
    from liger_kernel.ops.dyt import LigerDyTFunction
    from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction
    from liger_kernel.ops.geglu import LigerGELUMulFunction
    from liger_kernel.ops.group_norm import LigerGroupNormFunction
    from liger_kernel.ops.jsd import LigerJSDFunction
    from liger_kernel.ops.kl_div import LigerKLDivLossFunction
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    from liger_kernel.ops.rope import LigerRopeFunction
    from liger_kernel.ops.softmax import LigerSoftmaxFunction
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction

    t = torch  # type: ignore[assignment]
    ops: list[tuple[str, Callable[[], object]]] = []
    for n in tokens:
        for dtype in (t.bfloat16, t.float32):  # type: ignore[attr-defined]
            def tensor(*shape: int, grad: bool = True, dt: object = dtype) -> object:
                return t.randn(*shape, dtype=dt, device=device, requires_grad=grad)  # type: ignore[attr-defined]

            def ones(*shape: int, dt: object = dtype) -> object:
                return t.ones(*shape, dtype=dt, device=device, requires_grad=True)  # type: ignore[attr-defined]

            x, w = tensor(n, HIDDEN), ones(HIDDEN)
            label = f"{n} {str(dtype).split('.')[-1]}"
            ops += [
                (f"rms_norm {label}", lambda x=x, w=w: LigerRMSNormFunction.apply(x, w, 1e-6).sum().backward()),
                (f"layer_norm {label}", lambda x=x, w=w: LigerLayerNormFunction.apply(
                    x, w, t.zeros_like(w, requires_grad=True), 1e-6).sum().backward()),
                (f"fused_add_rms_norm {label}", lambda x=x, w=w, n=n: LigerFusedAddRMSNormFunction.apply(
                    x, tensor(n, HIDDEN), w, 1e-6)[0].sum().backward()),
                (f"softmax {label}", lambda x=x: LigerSoftmaxFunction.apply(x).sum().backward()),
                (f"dyt (autotuned) {label}", lambda x=x, w=w: LigerDyTFunction.apply(
                    x, ones(1), w, ones(HIDDEN)).sum().backward()),
                (f"swiglu {label}", lambda n=n: LigerSiLUMulFunction.apply(
                    tensor(n, 4 * HIDDEN), tensor(n, 4 * HIDDEN)).sum().backward()),
                (f"geglu {label}", lambda n=n: LigerGELUMulFunction.apply(
                    tensor(n, 4 * HIDDEN), tensor(n, 4 * HIDDEN)).sum().backward()),
                (f"rope {label}", lambda n=n: sum(o.sum() for o in LigerRopeFunction.apply(
                    tensor(1, 32, n, 128), tensor(1, 8, n, 128), tensor(1, n, 128, grad=False),
                    tensor(1, n, 128, grad=False))).backward()),
                (f"cross_entropy {label}", lambda n=n: LigerCrossEntropyFunction.apply(
                    tensor(min(n, 1024), VOCAB), t.randint(0, VOCAB, (min(n, 1024),), device=device), None,
                    -100, 0.0, 0.0, "mean")[0].backward()),
                (f"kl_div {label}", lambda: LigerKLDivLossFunction.apply(
                    tensor(64, 32000).log_softmax(-1), tensor(64, 32000, grad=False).log_softmax(-1), "batchmean",
                    False, 1e-10).backward()),
                (f"jsd {label}", lambda: LigerJSDFunction.apply(
                    tensor(64, 32000).log_softmax(-1), tensor(64, 32000, grad=False).log_softmax(-1), None, 0.5,
                    -100).backward()),
                (f"group_norm {label}", lambda: LigerGroupNormFunction.apply(
                    tensor(4, 64, 1024), ones(64), ones(64), 64,
                    8, 1e-6).sum().backward()),
            ]
    return ops


if __name__ == "__main__":
    main()
