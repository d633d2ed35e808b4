"""Shared by the report tests: the SARIF schema, a reader for GitHub workflow commands, crafted findings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kgate.core.findings import Finding, Severity

REPO = Path(__file__).resolve().parent.parent
# The official SARIF 2.1.0 schema (OASIS, errata 01), as published.
SARIF_SCHEMA = REPO / "tests" / "data" / "sarif-schema-2.1.0.json"


def validate_sarif(doc: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the test extra")
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker()).validate(doc)


def _unescape(text: str, prop: bool) -> str:
    pairs = [("%0D", "\r"), ("%0A", "\n")] + ([("%3A", ":"), ("%2C", ",")] if prop else []) + [("%25", "%")]
    for escaped, raw in pairs:
        text = text.replace(escaped, raw)
    return text


def parse_command(line: str) -> tuple[str, dict[str, str], str]:
    """(command, properties, message) of one `::cmd k=v,k=v::message` line, read the way the runner reads it.

    The runner splits at the first `::` after the command, then the
    properties at `,` and each at its first `=`; only then does it unescape.
    An unescaped `,` or `:` in a value or a raw newline would break this.
    """
    assert line.startswith("::"), line
    assert "\n" not in line and "\r" not in line, line
    head, sep, message = line[2:].partition("::")
    assert sep, line
    command, _, props = head.partition(" ")
    properties = {}
    for item in filter(None, props.split(",")):
        key, eq, value = item.partition("=")
        assert eq, f"property without '=': {item!r} in {line!r}"
        properties[key] = _unescape(value, prop=True)
    return command, properties, _unescape(message, prop=False)


def finding(code: str = "KG103", *, path: str = "pkg/kernels.py", line: int = 10, col: int = 0,
            severity: Severity = Severity.WARNING, message: str = "spilled", kernel: str | None = "pkg.k:gemm",
            variant: str | None = "BM=128,warps=8,stages=3", target: str | None = "sm_120a", identity: str = "",
            end_line: int | None = None, end_col: int | None = None, name: str = "spill") -> Finding:
    ident = identity or (f"{kernel}|{variant}|{target}" if kernel else f"scope|{message}")
    return Finding(path=path, line=line, col=col, code=code, name=name, severity=severity, message=message,
                   kernel=kernel, variant=variant, target=target, identity=ident, end_line=end_line, end_col=end_col)
