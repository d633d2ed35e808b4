"""The audit report's "SASS against BASE" section (`kgate audit --diff BASE`), in HTML and in Markdown.

The variants whose SASS is not identical to BASE's, with what moved, and for the first few changed ones the
two instruction streams side by side from a few lines before their first difference. Every text from the
project goes through `kgate.report.escape`.
"""

from __future__ import annotations

from kgate.diff.compare import Diff, Line, Pair, Row
from kgate.report.diff_report import counts_line, families, figures
from kgate.report.escape import html, markdown, markdown_code

_MARK = {"equal": "", "replace": "~", "delete": "-", "insert": "+"}


def anchor(row: Row) -> str:
    from kgate.report.audit_model import anchor as make

    return "sass-" + make(row.kernel, row.variant, row.target)


def readable(variant: str) -> str:
    from kgate.report.audit_model import readable as name

    return name(variant)


def _figures_text(row: Row) -> tuple[str, ...]:
    shown = dict(figures(row))
    return tuple(shown.get(k, "") for k in ("regs", "spill", "smem", "instructions"))


def _variant(row: Row) -> str:
    return row.variant + (f" (was {row.was})" if row.was else "")


# --------------------------------------------------------------------------- HTML


def html_section(diff: Diff) -> str:
    rows = diff.not_identical()
    parts = [f'<section id="sass-diff"><h2>SASS against {html(diff.base.label)}</h2>',
             f"<p>{html(counts_line(diff))} (the working tree against {html(diff.base.label)}).</p>"]
    if rows:
        body = []
        for row in rows:
            name = html(row.kernel)
            if row.key in diff.pairs:
                name = f'<a href="#{anchor(row)}">{name}</a>'
            cells = "".join(f'<td class="num">{html(v)}</td>' for v in _figures_text(row))
            body.append(f"<tr><td>{html(row.status)}</td><td>{name}</td><td><code>{html(_variant(row))}</code></td>"
                        f"<td>{html(row.target)}</td>{cells}<td>{html(families(row) or row.note)}</td></tr>")
        head = "".join(f"<th>{h}</th>" for h in ("status", "kernel", "variant", "target", "regs", "spill B", "smem B",
                                                 "instructions", "opcode families"))
        parts.append(f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
                     f"</table></div>")
    for row in rows:
        if row.key in diff.pairs:
            parts.append(_html_pairs(row, diff.pairs[row.key], diff))
    parts.append("</section>")
    return "".join(parts)


def _html_cells(line: Line | None, tag: str) -> str:
    if line is None:
        return f'<td class="{tag}"></td><td class="src {tag}"></td>'
    return f'<td class="{tag}">{html(line.text)}</td><td class="src {tag}">{html(line.source)}</td>'


def _html_pairs(row: Row, pairs: tuple[Pair, ...], diff: Diff) -> str:
    body = "".join(f'<tr class="{p.tag}"><td>{_MARK[p.tag]}</td>{_html_cells(p.left, p.tag)}'
                   f"{_html_cells(p.right, p.tag)}</tr>" for p in pairs)
    head = (f"<tr><th></th><th>{html(diff.base.label)}</th><th>source</th><th>{html(diff.head.label)}</th>"
            f"<th>source</th></tr>")
    return (f'<h3 id="{anchor(row)}">{html(row.kernel)} [{html(readable(row.variant))}] @ {html(row.target)}</h3>'
            f'<p class="sub"><code>{html(_variant(row))}</code> &middot; first difference at instruction '
            f"{row.first}</p>"
            f'<div class="scroll"><table class="sass"><thead>{head}</thead><tbody>{body}</tbody></table></div>')


# --------------------------------------------------------------------------- Markdown


def markdown_lines(diff: Diff) -> list[str]:
    rows = diff.not_identical()
    lines = [f"## SASS against {markdown(diff.base.label)}", "",
             f"{counts_line(diff)} (the working tree against {markdown(diff.base.label)}).", ""]
    if rows:
        lines += ["| status | kernel | variant | target | regs | spill B | smem B | instructions | opcode families |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for row in rows:
            cells = (row.status, markdown_code(row.kernel, table=True), markdown_code(_variant(row), table=True),
                     markdown(row.target), *(markdown(v) for v in _figures_text(row)),
                     markdown(families(row) or row.note))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    for row in rows:
        if row.key not in diff.pairs:
            continue
        lines += [f"### {markdown(row.kernel)} [{markdown(readable(row.variant))}] @ {markdown(row.target)}", "",
                  f"{markdown_code(_variant(row), table=False)}: first difference at instruction {row.first}.", "",
                  f"| | {markdown(diff.base.label)} | source | {markdown(diff.head.label)} | source |",
                  "|---|---|---|---|---|"]
        for pair in diff.pairs[row.key]:
            lines.append("| " + " | ".join((_MARK[pair.tag], *_md_cells(pair.left), *_md_cells(pair.right))) + " |")
        lines.append("")
    return lines


def _md_cells(line: Line | None) -> tuple[str, str]:
    if line is None:
        return "", ""
    return markdown_code(line.text, table=True), markdown(line.source)
