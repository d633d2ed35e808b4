"""Write the files of a new rule: `python tests/new_rule.py LAYER NAME [--code KGnnn]`.

LAYER is compiled, python or cuda; NAME is the rule's kebab-case name. It writes

  rules/<LAYER>/<slug>.py        the rule: documentation sections, options, a `check` that reports nothing yet
  rules/__init__.py              its registry row, in code order (the next free code of the layer by default)
  fixtures/rules/<CODE>/         kgate.toml selecting the rule, a bad case stating its finding inline and a
                                 good twin that must stay quiet

and prints what is left to do. It refuses a name or code already in the registry (a code is never reused).
See docs/rules-development.md.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

LAYERS = {"compiled": 100, "python": 200, "cuda": 300}
ROW = re.compile(r'^    \("(KG\d{3})", "([a-z0-9-]+)", "([a-z_.]+)"\),$', re.MULTILINE)

DOC = '''"""## What it does
{summary}.

## Why is this bad?
What goes wrong on the GPU, and when, if this is not caught.

## Example
The smallest case that is reported ({fixture}).

## Use instead
The good twin, and what changed.

## Options
None.
"""
'''

CHECKS = {
    "compiled": '''
from __future__ import annotations

from collections.abc import Iterable

from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import CompiledContext, Report, Rule
from kgate.facts.model import KernelFacts


def check(facts: KernelFacts, ctx: CompiledContext) -> Iterable[Report]:
    """Yield a Report for each problem in one kernel variant's facts (kgate/facts/model.py)."""
    return ()


RULE = Rule(
    code="{code}",
    name="{name}",
    layer="compiled",
    severity=Severity.ERROR,
    summary="{summary}",
    check=check,
    doc=__doc__ or "",
    # What the check reads; a rule that reads SASS adds Artifact.SASS and, where it reads it of some kernels only,
    # `sass_when=` a function of this module that says of which (a test of the kernel's facts without SASS).
    reads=frozenset({{Artifact.PTX, Artifact.PTXAS_LOG}}),
)
''',
    "python": '''
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import Report, Rule, SourceContext


def check(source: Any, ctx: SourceContext) -> Iterable[Report]:
    """Yield a Report (line, 1-based col, scope) for each problem in one Python file."""
    return ()


RULE = Rule(
    code="{code}",
    name="{name}",
    layer="python",
    severity=Severity.ERROR,
    summary="{summary}",
    check=check,
    doc=__doc__ or "",
    files=("*.py",),
    # The rule runs only on files holding one of these bytes: keep it narrow.
    prefilter=(b"triton",),
    reads=frozenset({{Artifact.SOURCE}}),
)
''',
    "cuda": '''
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import Report, Rule, SourceContext


def check(source: Any, ctx: SourceContext) -> Iterable[Report]:
    """Yield a Report (line, 1-based col, scope) for each problem in one CUDA source."""
    return ()


RULE = Rule(
    code="{code}",
    name="{name}",
    layer="cuda",
    severity=Severity.ERROR,
    summary="{summary}",
    check=check,
    doc=__doc__ or "",
    files=("*.cu", "*.cuh"),
    # The rule runs only on files holding one of these bytes: keep it narrow.
    prefilter=(b"__global__",),
    reads=frozenset({{Artifact.SOURCE}}),
)
''',
}

FIXTURES = {
    "compiled": ("{slug}.py", '''"""{name} ({code}): a planted bad case next to its good twin."""

import triton
import triton.language as tl

import kgate

SIG = dict(x="*fp32", out="*fp32", n="i32")


@kgate.register(signature=SIG, constexprs={{"BLOCK": 1024}}, kind="elementwise")
@triton.jit
def bad_case(x, out, n, BLOCK: tl.constexpr):  # expect: {code}@sm_120a
    # Bad: replace with the smallest kernel the rule must report.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


@kgate.register(signature=SIG, constexprs={{"BLOCK": 1024}}, kind="elementwise")
@triton.jit
def good_twin(x, out, n, BLOCK: tl.constexpr):
    # Good twin: the same kernel with the problem fixed; nothing is reported.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)
'''),
    "python": ("{slug}.py", '''"""{name} ({code}): a planted bad case next to its good twin."""

import triton


@triton.jit
def bad_case(x):  # expect: {code}@1
    # Bad: replace with the smallest code the rule must report (the column is where the finding starts).
    pass


@triton.jit
def good_twin(x):
    # Good twin: the same code with the problem fixed; nothing is reported.
    pass
'''),
    "cuda": ("{slug}.cu", '''// {name} ({code}): a planted bad case next to its good twin.

__global__ void bad_case(float* x) {{  // expect: {code}@1
  // Bad: replace with the smallest code the rule must report (the column is where the finding starts).
}}

__global__ void good_twin(float* x) {{
  // Good twin: the same code with the problem fixed; nothing is reported.
}}
'''),
}

TOML = {
    "compiled": '# {code}: planted cases, each stating its findings inline; facts.json holds what the real compiler\n'
                '# gave for them (python -m pytest tests/test_rules.py --record-facts).\n'
                'targets = ["sm_120a", "sm_90a"]\npython-path = ["."]\nselect = ["{code}"]\n',
    "python": '# {code}: planted cases, each stating its findings inline (tests/test_rules.py).\nselect = ["{code}"]\n',
    "cuda": '# {code}: planted cases, each stating its findings inline (tests/test_rules.py).\nselect = ["{code}"]\n',
}


class ScaffoldError(Exception):
    pass


def next_code(rows: list[tuple[str, str, str]], layer: str) -> str:
    base = LAYERS[layer]
    used = [int(code[2:]) for code, _name, _module in rows if base <= int(code[2:]) < base + 100]
    return f"KG{max(used, default=base) + 1:03d}"


def registry_with(text: str, row: tuple[str, str, str]) -> str:
    """The registry module's text with `row` inserted in code order."""
    matches = list(ROW.finditer(text))
    if not matches:
        raise ScaffoldError("rules/__init__.py: no REGISTRY rows found")
    line = f'    ("{row[0]}", "{row[1]}", "{row[2]}"),\n'
    after = [m for m in matches if m.group(1) < row[0]]
    at = (after[-1].end() + 1) if after else matches[0].start()
    return text[:at] + line + text[at:]


def scaffold(root: Path, layer: str, name: str, code: str | None = None, summary: str = "") -> list[Path]:
    """Write the new rule's files under `root` (a checkout); the paths written, registry included."""
    if layer not in LAYERS:
        raise ScaffoldError(f"layer {layer!r}: one of {', '.join(LAYERS)}")
    if not re.fullmatch(r"[a-z]+(-[a-z0-9]+)*", name):
        raise ScaffoldError(f"name {name!r}: kebab-case, such as `tile-too-wide`")
    registry = root / "rules" / "__init__.py"
    text = registry.read_text(encoding="utf-8")
    rows = [(m.group(1), m.group(2), m.group(3)) for m in ROW.finditer(text)]
    code = code or next_code(rows, layer)
    if not re.fullmatch(r"KG\d{3}", code):
        raise ScaffoldError(f"code {code!r}: KG and three digits")
    if any(code == c or name == n for c, n, _m in rows):
        raise ScaffoldError(f"{code} {name}: the registry already has that code or name (a code is never reused)")
    slug = name.replace("-", "_")
    module = root / "rules" / layer / f"{slug}.py"
    folder = root / "fixtures" / "rules" / code
    if module.exists() or folder.exists():
        raise ScaffoldError(f"{module if module.exists() else folder} exists already")
    summary = summary or f"What {name} reports, in one line"
    fixture_name, fixture = FIXTURES[layer]
    fixture_name = fixture_name.format(slug=slug)
    values = {"code": code, "name": name, "slug": slug, "summary": summary,
              "fixture": f"fixtures/rules/{code}/{fixture_name}"}
    module.write_text(DOC.format(**values) + CHECKS[layer].format(**values), encoding="utf-8")
    registry.write_text(registry_with(text, (code, name, f"{layer}.{slug}")), encoding="utf-8")
    folder.mkdir(parents=True)
    (folder / fixture_name).write_text(fixture.format(**values), encoding="utf-8")
    (folder / "kgate.toml").write_text(TOML[layer].format(**values), encoding="utf-8")
    return [module, registry, folder / "kgate.toml", folder / fixture_name]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tests/new_rule.py", description=__doc__.split("\n")[0])
    parser.add_argument("layer", choices=sorted(LAYERS))
    parser.add_argument("name", help="kebab-case rule name, such as tile-too-wide")
    parser.add_argument("--code", help="the code (default: the next free one of the layer)")
    parser.add_argument("--summary", default="", help="the one-line summary `kgate rules` prints")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the checkout to write into (default: this one)")
    args = parser.parse_args(argv)
    try:
        written = scaffold(args.root, args.layer, args.name, args.code, args.summary)
    except (ScaffoldError, OSError) as exc:
        print(f"new_rule: error: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path.relative_to(args.root)}")
    code = written[2].parent.name
    print(f"next: write the docstring and `check`, make fixtures/rules/{code}/ a real bad case and good twin,")
    if args.layer == "compiled":
        print(f"record its facts: python -m pytest tests/test_rules.py --record-facts -k {code},")
    print(f"then: python -m pytest tests/test_rules.py tests/test_rule_docs.py -k {code}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
