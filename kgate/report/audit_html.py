"""The audit report as one self-contained HTML page.

No network request of any kind: the CSS and the one small script are inline
and allowed by hash in a Content-Security-Policy that forbids everything
else, so a stray external reference would be blocked and logged, not
fetched. Charts are inline SVG. Every text from the project (kernel names,
messages, paths) goes through `escape.html`.
"""

from __future__ import annotations

import base64
import hashlib

from kgate.report.audit_md import HEADROOM_NOTE
from kgate.report.audit_model import AuditModel, KernelAudit, smem_shown
from kgate.report.audit_svg import gauges_chart, headroom_chart, roofline_chart, waves_chart
from kgate.report.audit_tables import (
    RIDGE_NOTE,
    Row,
    baselined_note,
    cards_named,
    headroom_text,
    mix_rows,
    percent,
    same_on_every_card,
)
from kgate.report.escape import html as escape
from kgate.report.excerpt import KINDS

CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #0f172a; margin: 0; background: #fff; }
header { background: #0f172a; color: #f8fafc; padding: 16px 28px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 0; color: #cbd5e1; }
main { padding: 8px 28px 40px; max-width: 1320px; }
h2 { font-size: 18px; margin: 28px 0 6px; border-bottom: 1px solid #e2e8f0; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 16px 0 6px; }
p.sub { margin: 2px 0 8px; color: #475569; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: #f1f5f9; padding: 1px 4px; border-radius: 3px; }
table { border-collapse: collapse; margin: 6px 0 10px; }
th, td { border: 1px solid #e2e8f0; padding: 3px 8px; text-align: left; vertical-align: top; }
td code, td a { overflow-wrap: anywhere; }
th { background: #f8fafc; }
table.sortable th { cursor: pointer; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; overflow-wrap: normal; }
h2, h3, p { overflow-wrap: anywhere; }
h2 .variant { font-weight: 400; color: #334155; }
td.ok { background: #f0fdf4; } td.warn { background: #fffbeb; } td.bad { background: #fef2f2; }
.sev-error { color: #b91c1c; font-weight: 600; } .sev-warning { color: #b45309; font-weight: 600; }
.sev-note { color: #0369a1; }
.charts { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; }
.charts figure { margin: 0; }
.charts figcaption { font-size: 12px; color: #475569; }
svg.chart text.axis { fill: #64748b; font-size: 11px; }
svg.chart text.value { fill: #334155; font-size: 11px; }
svg.chart a text { fill: #1d4ed8; }
svg.chart a text.variant { fill: #475569; font: 11px ui-monospace, SFMono-Regular, Menlo, monospace; }
section.kernel { border-top: 3px solid #e2e8f0; margin-top: 24px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600; color: #fff; }
.badge.ok { background: #16a34a; } .badge.warn { background: #d97706; } .badge.bad { background: #dc2626; }
.scroll { overflow-x: auto; }
li.fails { color: #b91c1c; font-weight: 600; }
table.sass td { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; white-space: pre; padding: 1px 6px; }
table.sass td.src { color: #64748b; }
table.sass tr.replace td { background: #fefce8; }
table.sass td.delete { background: #fef2f2; } table.sass td.insert { background: #f0fdf4; }
details.code { margin: 6px 0 10px; } details.code > summary { cursor: pointer; color: #1d4ed8; }
table.code { width: 100%; table-layout: fixed; }
table.code td { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; white-space: pre-wrap; overflow-wrap: anywhere; padding: 1px 6px; }
table.code td.src { width: 17em; color: #64748b; overflow-wrap: anywhere; }
table.code tr.mark td { background: #fef9c3; font-weight: 600; }
p.where { margin: 8px 0 2px; }
"""

# Sorts a table by the clicked column (numbers as numbers), then marks the page ready.
SCRIPT = """
(function () {
  function key(cell) {
    var t = cell.getAttribute('data-sort') || cell.textContent.trim();
    var n = parseFloat(t.replace(/,/g, ''));
    return isNaN(n) ? t.toLowerCase() : n;
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    table.querySelectorAll('th').forEach(function (th, col) {
      th.addEventListener('click', function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var asc = th.getAttribute('data-dir') !== 'asc';
        rows.sort(function (a, b) {
          var x = key(a.cells[col]), y = key(b.cells[col]);
          return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
        });
        th.setAttribute('data-dir', asc ? 'asc' : 'desc');
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.documentElement.setAttribute('data-ready', 'yes');
})();
"""


def _hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def csp() -> str:
    return (f"default-src 'none'; style-src '{_hash(CSS)}'; script-src '{_hash(SCRIPT)}'; img-src data:; "
            f"base-uri 'none'; form-action 'none'")


def _cell(text: object, cls: str = "", sort: str | None = None) -> str:
    attrs = f' class="{cls}"' if cls else ""
    if sort is not None:
        attrs += f' data-sort="{escape(sort)}"'
    return f"<td{attrs}>{escape(str(text))}</td>"


def breakable(variant: str) -> str:
    """A variant's name escaped, free to break after each comma (before breaking anywhere else)."""
    return escape(variant).replace(",", ",<wbr>")


def _table(header: tuple[str, ...], rows: list[str], cls: str = "", ident: str = "") -> str:
    attrs = (f' class="{cls}"' if cls else "") + (f' id="{ident}"' if ident else "")
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _status(score: float) -> str:
    return "bad" if score < 0 else "warn" if score < 0.15 else "ok"


def summary(model: AuditModel) -> str:
    rows = []
    for n, k in enumerate(model.ranking, 1):
        res = k.facts.resources
        wps = k.cards[0].residency.warps_per_subcore if k.cards else 0
        name = f'<a href="#{k.anchor}">{escape(k.facts.kernel).replace(":", ":<wbr>")}</a>'
        rows.append(
            "<tr>" + _cell(n, "num") + f"<td>{name}</td>" + f"<td><code>{breakable(k.name or '-')}</code></td>"
            + _cell(k.facts.target) + _cell(headroom_text(k.headroom.score), f"num {_status(k.headroom.score)}",
                                            f"{k.headroom.score:.6f}")
            + _cell(k.headroom.limiter) + _cell(res.registers, "num") + _cell(res.spill_stores, "num")
            + _cell(smem_shown(k.facts), "num") + _cell(f"{wps:g}", "num") + _cell(len(k.findings), "num")
            + "</tr>")
    parts = [
        '<section id="summary"><h2>Closest to a cliff</h2>',
        f"<p>{escape(HEADROOM_NOTE)}</p>",
        f"<figure>{headroom_chart(model.ranking)}</figure>" if model.ranking else "<p>No kernel variant compiled.</p>",
        ('<div class="scroll">' + _table(("#", "kernel", "variant", "target", "headroom", "limited by", "regs",
                                           "spill B", "smem B", "warps/sub-core", "findings"),
                                          rows, "sortable", "ranking") + "</div>") if rows else "",
    ]
    if model.failures:
        parts.append('<h2 id="failures">Did not compile</h2>')
        parts.append(_table(("kernel", "variant", "target", "where", "error"), [
            "<tr>" + _cell(f.failure.kernel) + f"<td><code>{escape(f.failure.variant or '-')}</code></td>"
            + _cell(f.failure.target or "-") + f"<td><code>{escape(f'{f.failure.path}:{f.failure.line}')}</code>"
            + "</td>" + _cell(f.failure.message) + "</tr>" for f in model.failures], "failures"))
    parts.append("</section>")
    return "".join(parts)


def kernel_section(k: KernelAudit, model: AuditModel) -> str:
    f = k.facts
    expect = f", expects {', '.join(f.expect)}" if f.expect else ""
    status = _status(k.headroom.score)
    head = (f'<section class="kernel" id="{k.anchor}"><h2>{escape(f.kernel)} '
            f'<span class="variant">[{escape(k.name or "-")}]</span> @ {escape(f.target)}</h2>'
            f'<p class="sub"><code>{escape(f.variant)}</code> &middot; <code>{escape(f"{f.path}:{f.line}")}</code>'
            f" &middot; {escape(f.kind)}, {f.num_warps} warps, num_stages={f.num_stages}{escape(expect)}"
            f' &middot; headroom <span class="badge {status}">{escape(headroom_text(k.headroom.score))}</span> '
            f"limited by {escape(k.headroom.limiter)}</p>")
    home = k.cards[0].profile.name if k.cards else f.target
    caption = f"Budgets of {escape(k.short or f.kernel)} against their limits on the {escape(home)} SM"
    charts = [f"<figure>{gauges_chart(k)}<figcaption>{caption}</figcaption></figure>"]
    waves = waves_chart(k)
    if waves:
        charts.append(f"<figure>{waves}<figcaption>Wave efficiency per card (budget 4)</figcaption></figure>")
    roof = roofline_chart(k)
    if roof:
        charts.append(f"<figure>{roof}<figcaption>Roofline per card (budget 5): roofs at each card's bf16-into-fp32 MMA rate and DRAM bandwidth</figcaption></figure>")
    same, own = same_on_every_card(k)
    budgets = []
    if same:
        budgets.append(_table(("#", "budget", cards_named(k)), _budget_rows(same, 1), "budgets same"))
    if own:
        budgets.append(_table(("#", "budget", *(c.profile.name for c in k.cards)), _budget_rows(own), "budgets"))
    terms = "; ".join(f"{t.name} {percent(t.value, 0)} ({t.detail})" for t in k.headroom.terms)
    mix = ["<tr>" + _cell(a) + f"<td><code>{escape(b)}</code></td>" + _cell(c, "num") + "</tr>"
           for a, b, c in mix_rows(k.mix)]
    findings = ["<tr>" + _cell(x.code) + _cell(x.severity.value, f"sev-{x.severity.value}") + _cell(x.name)
                + _cell(status) + _cell(x.message) + "</tr>"
                for status, group in (("active", k.findings), ("baselined", k.baselined)) for x in group]
    baseline = "".join(f'<li class="{"fails" if line.endswith("(fails)") else "accepted"}">{escape(line)}</li>'
                       for line in k.baseline)
    if not model.baseline_compared:
        against = f"<p>Not compared: {escape(model.baseline_state)}.</p>"
    else:
        against = f"<ul>{baseline}</ul>" if baseline else "<p>No differences.</p>"
    return "".join([
        head,
        f'<div class="charts">{"".join(charts)}</div>',
        "<h3>Budgets</h3>", *budgets,
        f"<p class=\"sub\">Headroom terms: {escape(terms)}.</p><p class=\"sub\">{escape(RIDGE_NOTE)}</p>",
        "<h3>Instruction mix</h3>", _table(("what", "instruction", "count"), mix, "mix"),
        "<h3>Findings</h3>",
        _table(("code", "severity", "rule", "status", "message"), findings, "findings") if findings else "<p>None.</p>",
        excerpt_html(k),
        "<h3>Against the baseline</h3>", against,
        "</section>",
    ])


def _budget_rows(rows: tuple[Row, ...], cells: int = 0) -> list[str]:
    """Table rows of budgets: every card's cell, or (`cells`) only the first ones where they read the same."""
    out = []
    for row in rows:
        shown = row.cells[:cells] if cells else row.cells
        tds = "".join(_cell(text, row.status[i] if i < len(row.status) else "") for i, text in enumerate(shown))
        out.append("<tr>" + _cell(row.budget, "num") + _cell(row.label) + tds + "</tr>")
    return out


def excerpt_html(k: KernelAudit) -> str:
    """The PTX and SASS around the instructions that matter, collapsed."""
    x = k.excerpt
    if x is None:
        return ""
    counts = ", ".join(f"{n:,} {kind}" for kind, n in x.counts.items()) or f"no {', '.join(KINDS)}"
    parts = ['<h3>PTX and SASS</h3><details class="code">',
             f"<summary>{escape(counts)}: the instructions around them, with their source lines</summary>"]
    parts += [f'<p class="sub">{escape(note)}</p>' for note in x.notes]
    for listing in x.listings:
        if not listing.windows:
            parts.append(f'<p class="sub">{escape(listing.name)}: none of them.</p>')
        for w in listing.windows:
            total = dict(listing.counts)[w.kind]
            where = f"{w.file}:{w.line}" if w.line else "no source line"
            code = f" <code>{escape(w.source.strip())}</code>" if w.source.strip() else ""
            parts.append(f'<p class="where">{escape(listing.name)}, {escape(w.kind)} {w.nth} of {total:,}, from '
                         f"<code>{escape(where)}</code>{code}</p>")
            rows = [("<tr class=\"mark\">" if line.marked else "<tr>") + _cell(line.place, "src")
                    + _cell(line.text) + "</tr>" for line in w.lines]
            parts.append(f'<table class="code"><tbody>{"".join(rows)}</tbody></table>')
    parts.append("</details>")
    return "".join(parts)


def _sass_diff(model: AuditModel) -> str:
    if model.sass_diff is None:
        return ""
    from kgate.report.audit_diff import html_section

    return html_section(model.sass_diff)


def render(model: AuditModel) -> str:
    tools = ", ".join(f"{k} {v}" for k, v in model.toolchain) or "no compiler ran"
    cards = "; ".join(f"{t}: {', '.join(p.name for p in ps)}" for t, ps in model.cards)
    body = [
        (f"<header><h1>kgate audit</h1><p>kgate {escape(model.version)}, {escape(tools)}. Cards: {escape(cards)}. "
         f"{len(model.kernels)} kernel variant(s) compiled, {len(model.failures)} failed, "
         f"{len(model.findings)} finding(s){baselined_note(model)}. Baseline: {escape(model.baseline_state)}.</p>"
         + "".join(f"<p>{escape(note)}</p>" for note in model.baseline_notes) + "</header>"),
        "<main>", summary(model), _sass_diff(model), *(kernel_section(k, model) for k in model.kernels), "</main>",
    ]
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{escape(csp())}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>kgate audit</title><style>{CSS}</style></head>\n<body>"
        + "\n".join(body) + f"\n<script>{SCRIPT}</script>\n</body></html>\n"
    )
