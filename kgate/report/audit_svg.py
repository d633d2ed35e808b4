"""Inline SVG charts for the audit page: headroom ranking, budget gauges, waves, roofline.

Plain SVG text with every label escaped and every number printed with a
fixed precision, so the same model gives the same bytes.
"""

from __future__ import annotations

import math

from kgate.report.audit_model import KernelAudit, smem_shown
from kgate.report.audit_tables import headroom_text, percent
from kgate.report.escape import html as escape

CARD_COLOURS = ("#2563eb", "#ea580c", "#16a34a", "#9333ea", "#0891b2")
STATUS_COLOURS = {"ok": "#16a34a", "warn": "#d97706", "bad": "#dc2626", "": "#64748b"}
FONT = 'font-family="system-ui, sans-serif" font-size="12"'


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (f'<svg class="chart" role="img" aria-label="{escape(label)}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" {FONT}>' + "".join(body) + "</svg>")


def _text(x: float, y: float, text: str, anchor: str = "start", cls: str = "") -> str:
    extra = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'


# Characters a label line holds in the headroom chart's label column (12px and 11px text).
NAME_CHARS, VARIANT_CHARS = 44, 48


def clipped(text: str, room: int) -> str:
    """`text`, cut to `room` characters with an ellipsis where it is longer."""
    return text if len(text) <= room else text[:room - 1] + "\u2026"


def headroom_chart(ranking: tuple[KernelAudit, ...]) -> str:
    """Horizontal bars of headroom, -100%..100%, closest to a cliff on top; rows numbered as the table.

    Each bar is labelled by its kernel and target and, below them, by what tells its variant from the kernel's
    other variants (the whole variant in the label's tooltip)."""
    label_w, bar_w, row_h, top = 330, 400, 32, 24
    zero = label_w + bar_w / 2
    height = top + row_h * len(ranking) + 10
    body = [_text(zero - bar_w / 2, 14, "-100%", "start", "axis"), _text(zero, 14, "cliff (0%)", "middle", "axis"),
            _text(zero + bar_w / 2, 14, "100%", "end", "axis")]
    for i, k in enumerate(ranking):
        y = top + i * row_h
        value = max(-1.0, min(1.0, k.headroom.score))
        length = abs(value) * bar_w / 2
        x = zero if value >= 0 else zero - length
        colour = STATUS_COLOURS["bad" if value < 0 else "warn" if value < 0.15 else "ok"]
        name = clipped(f"{i + 1}. {k.facts.kernel.split(':')[-1]} @ {k.facts.target}", NAME_CHARS)
        variant = clipped(k.short or k.name, VARIANT_CHARS)
        body.append(f'<a href="#{k.anchor}"><title>{escape(k.title)}</title>{_text(label_w - 8, y + 13, name, "end")}'
                    + (_text(label_w - 8, y + 26, variant, "end", "variant") if variant else "") + "</a>")
        body.append(f'<rect x="{x:.1f}" y="{y + 6}" width="{max(length, 1):.1f}" height="{row_h - 12}" '
                    f'fill="{colour}"><title>{escape(k.title)}</title></rect>')
        # Values sit on the positive side of the axis, right of the bar when there is one.
        tx = zero + (length if value >= 0 else 0) + 6
        body.append(_text(tx, y + 20, f"{headroom_text(k.headroom.score)} {k.headroom.limiter}", "start", "value"))
    body.append(f'<line x1="{zero:.1f}" y1="18" x2="{zero:.1f}" y2="{height - 4}" stroke="#0f172a"/>')
    return _svg(label_w + bar_w + 170, height, body, "headroom of every kernel variant")


def gauges_chart(k: KernelAudit) -> str:
    """Each cliff as a bar of how much of its limit is used; the line at 100% is the limit."""
    res = k.facts.resources
    card = k.cards[0] if k.cards else None
    rows: list[tuple[str, float, str, str]] = []
    cap = card.profile.max_registers_per_thread if card else 255
    rows.append(("registers", res.registers / cap, f"{res.registers} / {cap}",
                 "bad" if res.registers >= cap else "warn" if res.registers >= 0.94 * cap else "ok"))
    spill_used = res.spill_stores / k.spill_cliff if k.spill_cliff else (1.5 if res.spill_stores else 0.0)
    rows.append(("spill bytes / cliff", spill_used, f"{res.spill_stores} / {k.spill_cliff:g} B",
                 "bad" if spill_used > 1 else "warn" if res.spill_stores else "ok"))
    if card:
        budget = card.profile.smem_optin_per_cta
        used = res.smem_bytes / budget
        rows.append(("shared memory", used, f"{smem_shown(k.facts)} / {budget:,} B",
                     "bad" if used > 1 else "warn" if used >= 0.9 else "ok"))
        wps = card.residency.warps_per_subcore
        if k.latency_bound_kind:
            # Warps are the one budget where more is better: the bar is the need met.
            need = k.latency_warps
            rows.append((f"warps per sub-core / {need}", wps / need, f"{wps:g} / {need}",
                         "ok" if wps >= need else "bad"))
        if k.accumulator is not None and res.registers:
            share = k.accumulator / (0.6 * res.registers)
            rows.append(("accumulator / 60% of regs", share, f"{k.accumulator:g} / {0.6 * res.registers:.0f}",
                         "warn" if share > 1 else "ok"))
    label_w, bar_w, row_h = 170, 260, 24
    scale = bar_w / 1.5  # the bar spans 0..150% of the limit
    body = []
    for i, (name, used, text, status) in enumerate(rows):
        y = 8 + i * row_h
        length = min(max(used, 0.0), 1.5) * scale
        body.append(_text(label_w - 8, y + 14, name, "end"))
        body.append(f'<rect x="{label_w}" y="{y + 3}" width="{bar_w}" height="{row_h - 8}" fill="#e2e8f0"/>')
        body.append(f'<rect x="{label_w}" y="{y + 3}" width="{max(length, 1):.1f}" height="{row_h - 8}" '
                    f'fill="{STATUS_COLOURS[status]}"/>')
        body.append(_text(label_w + bar_w + 6, y + 14, text, "start", "value"))
    limit_x = label_w + scale
    height = 8 + row_h * len(rows) + 16
    body.append(f'<line x1="{limit_x:.1f}" y1="4" x2="{limit_x:.1f}" y2="{height - 14}" stroke="#0f172a" '
                f'stroke-dasharray="4 3"/>')
    body.append(_text(limit_x, height - 2, "limit", "middle", "axis"))
    return _svg(label_w + bar_w + 170, height, body, f"budget gauges of {k.title}")


def waves_chart(k: KernelAudit) -> str:
    """Wave efficiency per declared shape, one bar per card."""
    if not k.cards or all(r.efficiency is None for r in k.cards[0].waves):
        return ""
    label_w, bar_w, row_h = 230, 260, 18
    body, y = [], 6
    for i, row in enumerate(k.cards[0].waves):
        if row.efficiency is None:
            continue
        body.append(_text(8, y + 13, row.shape, "start", "axis"))
        y += 18
        for n, card in enumerate(k.cards):
            eff = card.waves[i].efficiency or 0.0
            colour = CARD_COLOURS[n % len(CARD_COLOURS)]
            body.append(_text(label_w - 8, y + 13, card.profile.name, "end"))
            body.append(f'<rect x="{label_w}" y="{y + 2}" width="{bar_w}" height="{row_h - 5}" fill="#e2e8f0"/>')
            body.append(f'<rect x="{label_w}" y="{y + 2}" width="{eff * bar_w:.1f}" height="{row_h - 5}" '
                        f'fill="{colour}"/>')
            body.append(_text(label_w + bar_w + 6, y + 13,
                              f"{percent(eff)} ({card.waves[i].waves} waves of {card.profile.sms} SMs)",
                              "start", "value"))
            y += row_h
        y += 6
    return _svg(label_w + bar_w + 230, y + 4, body, f"wave efficiency per card of {k.title}")


def roofline_chart(k: KernelAudit) -> str:
    """Log-log roofline of every card with the kernel's intensity at each declared shape."""
    points = [(i, row) for i, row in enumerate(k.cards[0].intensity) if row.intensity] if k.cards else []
    if not points:
        return ""
    x_lo, x_hi, y_lo = 0, 5, -1  # decades: 1..100k FLOP/B, 0.1 TFLOP/s..
    y_hi = max(1, math.ceil(math.log10(max(c.profile.mma_tflops for c in k.cards)) + 0.3))
    left, top, width, height = 56, 12, 420, 220

    def px(intensity: float) -> float:
        return left + (math.log10(intensity) - x_lo) / (x_hi - x_lo) * width

    def py(tflops: float) -> float:
        return top + height - (math.log10(tflops) - y_lo) / (y_hi - y_lo) * height

    body = [f'<rect x="{left}" y="{top}" width="{width}" height="{height}" fill="#f8fafc" stroke="#cbd5e1"/>']
    for d in range(x_lo, x_hi + 1):
        x = px(10.0 ** d)
        body.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + height}" stroke="#e2e8f0"/>')
        body.append(_text(x, top + height + 14, f"{10 ** d:g}", "middle", "axis"))
    for d in range(y_lo, y_hi + 1):
        y = py(10.0 ** d)
        body.append(_text(left - 6, y + 4, f"{10.0 ** d:g}", "end", "axis"))
    body.append(_text(left + width / 2, top + height + 30, "FLOP per byte", "middle", "axis"))
    body.append(f'<text x="14" y="{top + height / 2:.1f}" text-anchor="middle" class="axis" '
                f'transform="rotate(-90 14 {top + height / 2:.1f})">TFLOP/s</text>')
    for n, card in enumerate(k.cards):
        colour = CARD_COLOURS[n % len(CARD_COLOURS)]
        peak, bw = card.profile.mma_tflops, card.profile.dram_gbps / 1000.0  # TB/s
        lo = 10.0 ** x_lo
        start = (px(lo), py(max(bw * lo, 10.0 ** y_lo)))
        ridge = (px(card.profile.ridge), py(peak))
        end = (px(10.0 ** x_hi), py(peak))
        body.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{start[0]:.1f},'
                    f'{start[1]:.1f} {ridge[0]:.1f},{ridge[1]:.1f} {end[0]:.1f},{end[1]:.1f}"/>')
        body.append(_text(left + width - 4, ridge[1] - 4 - 12 * n, f"{card.profile.name} ridge "
                          f"{card.profile.ridge:.0f}", "end", "value"))
        for i, row in points:
            value = card.intensity[i].intensity
            if not value:
                continue
            clipped = min(max(value, 10.0 ** x_lo), 10.0 ** x_hi)
            y = py(min(peak, bw * clipped))
            body.append(f'<circle cx="{px(clipped):.1f}" cy="{y:.1f}" r="4" fill="{colour}">'
                        f'<title>{escape(row.shape)}: {value:,.0f} FLOP/B</title></circle>')
    return _svg(left + width + 40, top + height + 40, body, f"roofline per card of {k.title}")
