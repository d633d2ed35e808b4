"""The audit's numbers on crafted facts: the seed method's worked example, traffic, headroom, escaping.

No compiler here: test_audit.py runs `kgate audit` on real kernels.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from report_helpers import finding

from kgate.core.findings import Severity
from kgate.facts.model import CompileFailure, KernelFacts, Resources, SassSummary
from kgate.facts.ptx import PtxEntry
from kgate.hardware.budgets import gemm_traffic, max_registers_for
from kgate.hardware.profiles import profiles
from kgate.report import audit_html, audit_md, audit_model
from kgate.report.audit_model import register_table
from kgate.report.audit_tables import budget_rows, headroom_text
from kgate.report.excerpt import MMA, Excerpt, Line, Listing, Window

BF16_GEMM = {"a": "*bf16", "b": "*bf16", "c": "*bf16", "M": "i32", "N": "i32", "K": "i32"}
MXFP8 = {"a": "*fp8e4nv", "a_scale": "*u8", "b": "*fp8e4nv", "b_scale": "*u8", "c": "*fp32"}


def facts(kernel: str = "pkg.k:gemm", *, kind: str = "gemm", registers: int = 128, spill: int = 0,
          smem: int = 32768, num_warps: int = 8, constexprs: dict[str, Any] | None = None,
          shapes: tuple[dict[str, int], ...] = (), signature: dict[str, str] | None = None,
          target: str = "sm_120a", sass: dict[str, int] | None = None, variant: str = "v") -> KernelFacts:
    entry = PtxEntry(name=kernel.split(":")[-1], mma={}, has_wait=False, has_launch_dependents=False,
                     global_accesses=0, unwaited_accesses=())
    return KernelFacts(
        kernel=kernel, variant=variant, target=target, language="triton", path="pkg/k.py", line=10, kind=kind,
        num_warps=num_warps, num_stages=3, expect=(), pdl=False, ptx_target=target, entry=entry,
        resources=Resources(registers, spill, spill, spill, 0, smem),
        sass=SassSummary(sass) if sass is not None else None, shapes=shapes,
        constexprs=constexprs if constexprs is not None else {"BM": 128, "BN": 128, "BK": 64},
        signature=signature if signature is not None else BF16_GEMM)


CARDS = {"sm_120a": (profiles()["rtx-5090"], profiles()["rtx-5060-ti"]), "sm_90a": (profiles()["h200"],)}


def audit(*kernels: KernelFacts, findings: tuple = (), failures: tuple = ()) -> audit_model.AuditModel:
    return audit_model.build(list(kernels), list(failures), list(findings), CARDS, toolchain={"triton": "x"},
                             version="0")


def test_waves_reproduce_the_worked_example_on_both_cards() -> None:
    model = audit(facts(shapes=({"M": 8192, "N": 4096, "K": 4096}, {"M": 4096, "N": 4096, "K": 4096})))
    big, small = model.kernels[0].cards
    assert (big.waves[0].ctas, big.waves[0].waves, round(big.waves[0].efficiency, 3)) == (2048, 13, 0.927)
    assert (small.waves[0].ctas, small.waves[0].waves, round(small.waves[0].efficiency, 3)) == (2048, 57, 0.998)
    # 4096^3 with 128-wide tiles: 86% on 170 SMs (seed method, budget 4).
    assert round(big.waves[1].efficiency, 3) == 0.861


def test_register_table_is_the_seed_table() -> None:
    assert register_table(profiles()["rtx-5090"]) == ((4, 128), (5, 102), (6, 85), (8, 64), (12, 42))
    assert max_registers_for(5, profiles()["rtx-5060-ti"]) == 102


def test_intensity_of_a_bf16_gemm_and_the_verdict_per_card() -> None:
    model = audit(facts(shapes=({"M": 8192, "N": 4096, "K": 4096}, {"M": 16, "N": 4096, "K": 4096})))
    big, small = model.kernels[0].cards
    m, n, k = 8192, 4096, 4096
    assert big.intensity[0].intensity == pytest.approx(2 * m * n * k / ((m * k + k * n + m * n) * 2))
    assert [r.verdict for r in big.intensity] == ["compute bound", "memory bound"]
    assert [r.verdict for r in small.intensity] == ["compute bound", "memory bound"]
    assert small.intensity[0].ridge_estimated and not big.intensity[0].ridge_estimated


def test_a_kernel_near_the_ridge_is_compute_bound_on_one_card_and_memory_bound_on_the_other() -> None:
    # A square bf16 GEMM has intensity x/3: 432 gives 144, between the 5060 Ti's ridge and the 5090's.
    model = audit(facts(shapes=({"M": 432, "N": 432, "K": 432},)))
    big, small = model.kernels[0].cards
    assert small.profile.ridge < 144 < big.profile.ridge
    assert (big.intensity[0].verdict, small.intensity[0].verdict) == ("memory bound", "compute bound")


def test_block_scaled_traffic_counts_one_scale_byte_per_32_elements() -> None:
    m, n, k = 8192, 4096, 4096
    traffic = gemm_traffic(m, n, k, MXFP8)
    assert traffic is not None
    assert traffic.bytes == m * k + k * n + m * n * 4 + (m * k + n * k) / 32
    assert gemm_traffic(m, n, k, {"x": "*fp32", "n": "i32"}) is None


def test_shapes_without_a_grid_say_so() -> None:
    plain = audit(facts(kind="elementwise", constexprs={"BLOCK": 1024}))
    assert plain.kernels[0].cards[0].waves[0].note == "no shape declared"
    declared = audit(facts(kind="elementwise", constexprs={"BLOCK": 1024},
                           shapes=({"ctas": 340, "flops": 10, "bytes": 1000},), registers=32))
    row = declared.kernels[0].cards[0]
    assert (row.waves[0].ctas, row.waves[0].waves, row.waves[0].efficiency) == (340, 2, 1.0)
    assert row.intensity[0].verdict == "memory bound"
    untiled = audit(facts(constexprs={"TILE": 64}, shapes=({"M": 64, "N": 64, "K": 64},)))
    assert "no tile size" in untiled.kernels[0].cards[0].waves[0].note


def test_headroom_ranks_the_variant_nearest_a_cliff_first() -> None:
    model = audit(
        facts("pkg.k:comfy", registers=64, smem=8192),
        facts("pkg.k:ceiling", registers=255),
        facts("pkg.k:spills", registers=40, spill=13556),
        facts("pkg.k:rowwise", kind="reduction", registers=186, smem=16, num_warps=4, constexprs={}),
        facts("pkg.k:smem", registers=96, smem=131072),
    )
    ranked = [(k.facts.kernel.split(":")[1], k.headroom.limiter, round(k.headroom.score, 2)) for k in model.ranking]
    assert ranked == [("spills", "spills", round(1 - 13556 / 40, 2)), ("rowwise", "warps per sub-core", -0.6),
                      ("smem", "shared memory", round(1 - 131072 / 101376, 2)), ("ceiling", "registers", 0.0),
                      ("comfy", "registers", round(1 - 64 / 255, 2))]
    assert headroom_text(model.ranking[1].headroom.score) == "-60%"
    assert headroom_text(model.ranking[0].headroom.score) == "< -100%"


def test_budget_rows_show_the_limiter_and_the_threshold_only_where_it_applies() -> None:
    gemm, row = audit(facts(registers=168, smem=65536), facts("pkg.k:row", kind="reduction", registers=186,
                                                               smem=16, num_warps=4, constexprs={})).kernels
    gemm_rows = {r.label: r for r in budget_rows(gemm)}
    assert gemm_rows["CTAs per SM"].cells[0] == "1 (limited by registers)"
    assert "required of elementwise and reduction kernels only; this one is a GEMM" in \
        gemm_rows["warps per sub-core"].cells[0]
    assert gemm_rows["fp32 accumulator (estimate)"].cells[0].startswith("64 registers, 38% of 168")
    assert gemm_rows["warps-per-sub-core table"].cells[0] == "above row 4 (more than 128 registers)"
    row_rows = {r.label: r for r in budget_rows(row)}
    assert row_rows["warps per sub-core"].cells == ("2 (needs 5)", "2 (needs 5)")
    assert row_rows["warps per sub-core"].status == ("bad", "bad")


def test_instruction_mix_reads_load_widths_and_spill_traffic() -> None:
    sass = {"LDGSTS.E.BYPASS.128": 12, "LDG.E": 4, "LDG.E.128": 8, "LDG.E.U8": 20, "STG.E.64": 2, "STL": 3, "LDL.64": 5,
            "QMMA.SF.16832.F32.E4M3.E4M3.E8": 64, "BAR.SYNC": 2, "FFMA": 100}
    mix = audit(facts(sass=sass)).kernels[0].mix
    assert mix.global_loads == (("LDG.E.128", 128, 8), ("LDG.E", 32, 4), ("LDG.E.U8", 8, 20))
    assert mix.global_stores == (("STG.E.64", 64, 2),)
    assert mix.other[0] == ("async copy to shared", "LDGSTS.E.BYPASS.128", 12)
    assert (mix.spill_stores, mix.spill_loads) == (3, 5)
    assert mix.sass_mma == (("QMMA.SF.16832.F32.E4M3.E4M3.E8", 64),)
    assert ("barrier", "BAR.SYNC", 2) in mix.other and all(op != "FFMA" for _what, op, _n in mix.other)


def test_reports_escape_project_text() -> None:
    evil = "<script>alert(1)</script> | pipe & co"
    k = facts("pkg.k:<b>bold</b>", variant="BM=128|x")
    f = finding(message=evil, kernel="pkg.k:<b>bold</b>", variant="BM=128|x", target="sm_120a",
                severity=Severity.ERROR)
    fail = CompileFailure("pkg.k:<i>broken</i>", "", "", "pkg/k.py", 3, "SyntaxError: <oops>")
    model = audit(k, findings=(f,), failures=(fail,))
    html = audit_html.render(model)
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>bold</b>" not in html and "<i>broken</i>" not in html and "&lt;oops&gt;" in html
    md = audit_md.render(model)
    assert "\\| pipe" in md and "BM=128\\|x" in md
    assert "## Did not compile" in md and "SyntaxError: &lt;oops>" in md and "<b>" not in md


def test_html_and_markdown_are_deterministic() -> None:
    kernels = [facts(f"pkg.k:g{i}", registers=100 + i, shapes=({"M": 4096, "N": 4096, "K": 4096},))
               for i in range(5)]
    first = audit(*kernels)
    second = audit(*reversed(kernels))
    assert audit_html.render(first) == audit_html.render(second)
    assert audit_md.render(first) == audit_md.render(second)


def test_audit_judges_by_the_rules_configured_limits() -> None:
    row = facts("pkg.k:row", kind="reduction", registers=186, smem=16, num_warps=4, constexprs={})
    spilly = facts("pkg.k:spilly", registers=128, spill=100)
    default = {k.facts.kernel: k for k in audit(row, spilly).kernels}
    limits = audit_model.Thresholds(latency_kinds=("reduction",), latency_warps=4, cliff_fraction=0.5)
    tuned = {k.facts.kernel: k for k in audit_model.build([row, spilly], [], [], CARDS, limits=limits).kernels}
    assert default["pkg.k:row"].headroom.score == pytest.approx(-0.6)
    assert tuned["pkg.k:row"].headroom.score == pytest.approx(-0.5)
    assert {r.label: r for r in budget_rows(tuned["pkg.k:row"])}["warps per sub-core"].cells[0] == "2 (needs 4)"
    assert default["pkg.k:spilly"].spill_cliff == 128 and tuned["pkg.k:spilly"].spill_cliff == 256
    assert tuned["pkg.k:spilly"].headroom.terms[1].value == pytest.approx(1 - 100 / 256)


def test_variants_of_one_kernel_are_told_apart_in_headings_and_chart_labels() -> None:
    tiles = [facts("pkg.k:matmul_kernel", variant=f"BK=64,BM={bm},BN=128,warps=8,stages=3,bf16#0000000{n}")
             for n, bm in enumerate((64, 128, 256))]
    # Two launches that differ only in what the tag hashes (divisibility, argument types).
    tagged = [facts("pkg.k:matmul_kernel", variant=f"BK=64,BM=32,BN=128,warps=8,stages=3,bf16#{tag}")
              for tag in ("aaaaaaaa", "bbbbbbbb")]
    model = audit(*tiles, *tagged)
    names = {k.facts.variant: (k.name, k.short) for k in model.kernels}
    assert names["BK=64,BM=64,BN=128,warps=8,stages=3,bf16#00000000"] == (
        "BK=64,BM=64,BN=128,warps=8,stages=3,bf16", "BM=64,bf16")
    assert names["BK=64,BM=32,BN=128,warps=8,stages=3,bf16#aaaaaaaa"] == (
        "BK=64,BM=32,BN=128,warps=8,stages=3,bf16#aaaaaaaa", "BM=32,bf16#aaaaaaaa")
    page, md = audit_html.render(model), audit_md.render(model)
    chart = page.split('aria-label="headroom of every kernel variant"', 1)[1].split("</svg>", 1)[0]
    labels = re.findall(r'<text [^>]*class="variant">([^<]*)</text>', chart)
    assert sorted(labels) == sorted(short for _name, short in names.values())  # five labels, all different
    headings = re.findall(r"^## <a id=\"[^\"]+\"></a>(.*)$", md, re.MULTILINE)
    assert len(set(headings)) == 5 and all(h.startswith("pkg.k:matmul_kernel [BK=64,BM=") for h in headings)
    assert len(set(re.findall(r"<h2>(.*?)</h2>", page))) == 5 + 1  # and "Closest to a cliff"
    # A kernel with one variant is labelled with all of its readable name.
    alone = audit(facts("pkg.k:solo", variant="BLOCK=1024,warps=4,stages=3,fp32#12345678")).kernels[0]
    assert (alone.name, alone.short) == ("BLOCK=1024,warps=4,stages=3,fp32",) * 2


def test_budget_rows_read_the_same_on_every_card_only_when_every_cell_and_status_agree() -> None:
    from kgate.report.audit_tables import same_on_every_card

    two = audit(facts(shapes=({"M": 8192, "N": 4096, "K": 4096},))).kernels[0]
    same, own = same_on_every_card(two)
    assert [r.label for r in own] == ["waves at M=8192, N=4096, K=4096", "intensity at M=8192, N=4096, K=4096"]
    assert "registers per thread" in [r.label for r in same] and len(same) + len(own) == len(budget_rows(two))
    one = audit(facts(target="sm_90a")).kernels[0]
    assert same_on_every_card(one) == ((), budget_rows(one))
    page = audit_html.render(audit(facts()))
    assert "<th>RTX 5090 and RTX 5060 Ti 16G</th>" in page


def hostile_excerpt(text: str) -> Excerpt:
    lines = (Line("mov.b32 %r1, %r2;\x1b[2J\u202e", "k.py:3", False),
             Line(f"mma.sync {text} ~~~~;", f"{text}:3", True))
    window = Window(MMA, 1, f"pkg/{text}.py", 3, f"acc = tl.dot(a, b)  # {text} ~~~~ ```", lines)
    return Excerpt((Listing("PTX", ((MMA, 4),), (window,)), Listing("SASS", (), ())), (f"note {text}",))


def test_excerpts_are_collapsed_and_escaped_and_a_fence_holds_any_line() -> None:
    evil = "</td></table><script>alert(1)</script>"
    k = facts("pkg.k:gemm")
    model = audit_model.build([k], [], [], CARDS, excerpts={k.key: hostile_excerpt(evil)})
    page, md = audit_html.render(model), audit_md.render(model)
    assert "<script>alert" not in page and page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3
    assert '<details class="code"><summary>4 MMA: ' in page and '<tr class="mark">' in page
    body = md.split("### PTX and SASS\n", 1)[1]
    assert "4 MMA." in body and "SASS: none of them." in body
    fence = re.search(r"^(~{3,})$", body, re.MULTILINE).group(1)
    assert len(fence) == 5  # longer than the four tildes in an instruction's line
    block = body.split(fence)[1]
    assert f"> {evil}:3  mma.sync {evil} ~~~~;" in block
    assert "\x1b" not in md and "\u202e" not in md and "\x1b" not in page and "\u202e" not in page


def test_summary_stays_a_screenful_whatever_the_names_and_numbers() -> None:
    from kgate.report import audit_summary

    long = "x" * 5000 + "<script>|`"
    many = [facts(f"pkg.k:{long}{i}", variant=f"BM={i},{long}#0000{i:04d}", registers=100 + i % 150)
            for i in range(300)]
    found = tuple(finding(message=long * 3, kernel=f"pkg.k:{long}{i}", variant=f"BM={i},{long}#0000{i:04d}",
                          severity=Severity.ERROR) for i in range(600))
    model = audit_model.build(many, [], list(found), CARDS, verdict="fails (600 finding(s) at error or above)")
    text = audit_summary.render(model)
    assert len(text) <= audit_summary.LIMIT and len(text.splitlines()) < 40
    assert text.startswith("## kgate audit: fails (600 finding(s) at error or above)\n")
    assert "300 kernel variant(s) compiled" in text and "<script>" not in text
    assert audit_summary.render(audit(facts())).startswith("## kgate audit: not judged\n")
