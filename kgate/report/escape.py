"""Text from the project, escaped for where kgate shows it.

Paths, kernel and variant names, compiler messages and configured strings come from the project, and a
project can name a file anything: a newline, an escape sequence, a GitHub workflow command, an HTML tag.
Each medium kgate writes has its functions here, and every reporter that writes to it goes through them:

- `terminal`: a terminal, or a CI log, which is read the same way. Control characters are written as
  escapes (`\\n`, `\\x1b`, `\\u202e`), so a name can neither move the cursor, recolour the screen nor
  start a line of its own; text GitHub Actions would run as a workflow command (a line that starts with
  `::`, or `##[` anywhere) is defused.
- `workflow_data`, `workflow_property`: GitHub Actions workflow commands, with the runner's own
  escaping (`%`, CR and LF; in a property value also `:` and `,`); other control characters as for the
  terminal.
- `markdown`, `markdown_code`: Markdown as GitHub renders it (GFM). No raw HTML, autolink or entity
  survives, nor a table pipe, a link bracket or a backtick; text without these is left as it is.
- `html`: HTML and inline SVG text and attribute values.
- `xml`: XML 1.0 (JUnit), which cannot carry most control characters even escaped.
- `json_text`, `json_ready`: JSON (SARIF, the JSON report), whose own escaping covers the C0 controls; the
  other invisible controls are written as `\\u` escapes too.
- `uri`: a path as a URI reference (SARIF's artifact locations), its bytes percent-encoded.
- `representable`: any other UTF-8 text kgate writes (the baseline's keys).

A file name need not be UTF-8: Python reads a name such as `b"x\\xff.cu"` as text holding a lone surrogate
(`"x\\udcff.cu"`, the "surrogateescape" error handler), which no UTF-8 output can carry. Every function
here writes such a character as the escape of the byte it stands for (`x\\xff.cu`), the same in every
medium; `as_bytes` gives the bytes back, for a hash or a URI.
"""

from __future__ import annotations

import math
import re
from typing import Any

from kgate.support.text import as_bytes, escape_sequence, representable

# Characters that act on a terminal or reorder text instead of showing: C0 and C1 controls, DEL, and
# Unicode's bidirectional controls and line separators (the characters of "Trojan Source").
# Lone surrogates too: no UTF-8 text can hold them (a name that is not UTF-8 brings them, see above).
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                        "\ud800-\udfff]")


def uri(path: str) -> str:
    """A relative path as a URI reference: every byte but unreserved characters and `/` percent-encoded (RFC 3986),
    the bytes of a name that is not UTF-8 included."""
    from urllib.parse import quote

    return quote(as_bytes(path), safe="/")


def visible(text: str, keep: str = "") -> str:
    """`text` with every invisible control character written as an escape, except those in `keep`."""
    return _INVISIBLE.sub(lambda m: m.group() if m.group() in keep else escape_sequence(m.group()), text)


# --------------------------------------------------------------------------- terminal

# GitHub's runner reads a log line as a workflow command when, less its leading white space, it starts
# with `::`, or when it holds `##[` anywhere (the older syntax, still read).
_COMMAND_START = re.compile(r"^(\s*):(?=:)")


def terminal(text: str, *, line_start: bool = True) -> str:
    """Project text for a terminal or a CI log: controls made visible, workflow commands defused;
    `line_start=False` for text that kgate's own words precede on its line, where `::` is harmless."""
    shown = visible(text).replace("##[", "##\\x5b")
    return _COMMAND_START.sub(lambda m: m.group(1) + "\\x3a", shown) if line_start else shown


# --------------------------------------------------------------------------- GitHub workflow commands


def workflow_data(text: str) -> str:
    """A workflow command's message: `%` first, so that an escaped sequence is never read back as one."""
    return visible(text, keep="\r\n").replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_property(text: str) -> str:
    """A workflow command's property value (file, title): also `:` and `,`, which end it."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")


# --------------------------------------------------------------------------- Markdown

# Raw HTML, autolinks and entities start with `<` or `&` before these; `<=` or `a & b` stay as they are.
_MARKDOWN_HTML = re.compile(r"<(?=[A-Za-z/!?])|&(?=[A-Za-z#])")
_MARKDOWN_PUNCTUATION = re.compile(r"[\\`|\[\]]")
# What would start a heading, a quote or a list where the text begins a line (a list item's text does).
_MARKDOWN_BLOCK = re.compile(r"^(\s*)([#>+=-]|[0-9]+(?=[.)]))")


def markdown(text: object, *, line_start: bool = False) -> str:
    """Project text for Markdown: in a table cell, a heading or a paragraph; `line_start`: it begins a line (a
    list item's text), where a `#`, `>`, `-` or `1.` would open a block of its own."""
    shown = _MARKDOWN_PUNCTUATION.sub(lambda m: "\\" + m.group(), visible(str(text)))
    shown = _MARKDOWN_HTML.sub(lambda m: "&lt;" if m.group() == "<" else "&amp;", shown)
    if not line_start:
        return shown
    return _MARKDOWN_BLOCK.sub(lambda m: m.group(1) + ("\\" + m.group(2) if not m.group(2).isdigit()
                                                         else m.group(2) + "\\"), shown)


def markdown_code(text: object, *, table: bool) -> str:
    """Project text as a Markdown code span, where nothing is markup; `table`: inside a table cell, where a
    pipe would still end the cell (GFM splits a row at every pipe a backslash does not escape)."""
    value = visible(str(text))
    if table:
        value = re.sub(r"(\\*)\|", lambda m: m.group(1) * 2 + "\\|", value)
    fence = "`" * (max((len(run) for run in re.findall("`+", value)), default=0) + 1)
    padded = value.startswith("`") or value.endswith("`") or (value[:1] == value[-1:] == " " and value.strip())
    pad = " " if padded else ""
    return f"{fence}{pad}{value}{pad}{fence}"


# --------------------------------------------------------------------------- HTML, XML, JSON


def html(text: object) -> str:
    """Project text for HTML or SVG, as element text or a quoted attribute value."""
    import html as html_module  # here: the terminal's path (`kgate lint` on every commit) does without it

    return html_module.escape(visible(str(text)), quote=True)


# Characters XML 1.0 cannot carry at all, even escaped (ElementTree escapes the rest).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml(text: str) -> str:
    return _NOT_XML.sub("\ufffd", representable(text))


_JSON_UNESCAPED = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def json_ready(value: Any, *, text: bool = True) -> Any:
    """A value strict JSON (RFC 8259) can hold: every non-finite float spelt as a string ("nan", "inf", "-inf"),
    which parsers other than Python's refuse bare, and all text (keys too) `representable`, since a lone
    surrogate, even as a `\\u` escape, is not Unicode and other parsers refuse it too. `text=False` leaves text
    as it is, for JSON only kgate reads back (Python's `\\udcff` escape keeps a name that is not UTF-8)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, str):
        return representable(value) if text else value
    if isinstance(value, dict):
        return {representable(key) if text and isinstance(key, str) else key: json_ready(item, text=text)
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(item, text=text) for item in value]
    return value


def json_text(data: Any) -> str:
    """`data` as indented JSON with sorted keys, non-ASCII text kept as it is but for the invisible controls
    (`json` escapes C0 itself; these can only occur inside strings, so `\\u` escapes keep the document
    equal)."""
    import json

    text = json.dumps(json_ready(data), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    return _JSON_UNESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
