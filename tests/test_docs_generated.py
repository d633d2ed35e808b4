"""The generated documentation is up to date, and the configuration schema it comes from is the parser's.

docs/configuration.md, docs/kgate.schema.json and the rule pages are written by docs/generate.py from
`kgate.core.schema` and the rule registry. The parser takes its known keys from the schema; these
tests pin the rest: every key the parser reads is in the schema and changes what it declares, every
field of the configuration is set by a key of the schema, defaults agree, and the JSON Schema accepts
what the parser accepts and refuses the wrong types the parser refuses.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from kgate.core import config as config_module
from kgate.core import schema
from kgate.core.config import Config, CudaEntry, TritonEntry, load_config, parse_config, parse_triton_entry
from kgate.core.cute import CuteEntry
from kgate.core.errors import ConfigError
from kgate.core.selection import build_selection

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("kgate_docs_generate", REPO / "docs" / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATE = _generator()

# A valid value of every key, other than its default, so that reading it shows in what the parser returns.
TOP_SAMPLES: dict[str, Any] = {
    "targets": ["sm_90a"], "triton": [{"kernel": "pkg.mod:k", "signature": {"x": "*fp16"}}],
    "cuda": [{"sources": ["*.cu"]}], "cute": [{"kernel": "pkg.mod:k", "args": {"n": 1}}], "capture": "captured.toml", "setup": "pkg.hooks:setup",
    "python-path": ["lib"], "exclude": ["gen"], "extend-exclude": ["gen"], "respect-gitignore": False, "select": ["KG2"],
    "extend-select": ["KG1"], "ignore": ["KG105"], "per-file-ignores": {"a/*": ["KG201"]},
    "severity": {"KG202": "warning"}, "options": {"launch-guard": {"window": 5}}, "fail-on": "warning",
    "baseline": "pins.toml", "ratchet": "tighten", "toolchain-change": "fail", "size-slack": 3,
    "cache-dir": "cache", "jobs": 2, "timeout": 30, "nvcc": "/opt/cuda/bin/nvcc",
    "device-independent-launchers": True, "strict-configs": True,
}
TRITON_REQUIRED: dict[str, Any] = {"kernel": "pkg.mod:k", "signature": {"x": "*fp16", "n": "i32"}}
TRITON_SAMPLES: dict[str, Any] = {
    "kernel": "pkg.other:k2", "signature": {"x": "*bf16", "n": "i32"}, "constexprs": {"BLOCK": 64},
    "num_warps": 8, "num_stages": 2, "expect": ["block_scale"], "pdl": True, "kind": "gemm",
    "variants": [{"BLOCK": 128, "num_warps": 2}], "shapes": [{"M": 64, "N": 64, "K": 64}],
    "divisible": ["x"], "args": [{"x": {"type": "*bf16", "align": 8}, "n": 7}], "targets": ["sm_90a"],
}
CUTE_REQUIRED: dict[str, Any] = {"kernel": "pkg.mod:k", "args": {"x": {"dtype": "cutlass.Float32", "shape": [64]}}}
CUTE_SAMPLES: dict[str, Any] = {
    "kernel": "pkg.other:K", "args": [{"x": {"dtype": "cutlass.BFloat16", "shape": ["?", 64], "stride": ["?:8", 1],
                                             "align": 16}, "stream": "stream"}],
    "init": {"dtype": "cutlass.BFloat16", "N": 64}, "options": "--enable-tvm-ffi", "expect": ["block_scale"],
    "kind": "reduction", "shapes": [{"ctas": 132}], "targets": ["sm_90a"],
}
CUDA_REQUIRED: dict[str, Any] = {"sources": ["*.cu"]}
CUDA_SAMPLES: dict[str, Any] = {
    "sources": ["k/*.cu"], "flags": ["-Iinc"], "compile_commands": "build/compile_commands.json",
    "pdl": ["rms*"], "expect": {"gemm*": ["block_scale"]}, "launch_wrappers": ["pdl::launch"],
    "kind": {"rms*": "reduction"}, "compiler": "nvrtc", "targets": ["sm_120a"], "torch": False,
}
# A value of the wrong type for each kind of key: the parser and the JSON Schema both refuse it.
WRONG = {"string": 5, "strings": "x", "choice": "nonsense", "choices": ["nonsense"], "targets": ["sm_75"],
         "integer": "4", "number": "fast", "boolean": "yes", "table": ["x"], "tables": {"x": 1}}


def parse(table: dict[str, Any], root: Path) -> Config:
    return parse_config(table, root=root, source=None)


def plain(value: Any) -> Any:
    """Tuples as lists, entries as their fields: values compared across the schema and the dataclasses."""
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------- generated pages

def test_generated_pages_are_up_to_date() -> None:
    stale = GENERATE.stale()
    assert not stale, f"out of date: {', '.join('docs/' + s for s in stale)}; run `python docs/generate.py`"


def test_a_page_that_differs_or_is_left_over_is_reported(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    for name, text in GENERATE.pages().items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text, encoding="utf-8")
    assert GENERATE.stale(docs) == []
    (docs / "configuration.md").write_text("edited\n", encoding="utf-8")
    (docs / "rules" / "KG999.md").write_text("a rule that is gone\n", encoding="utf-8")
    assert GENERATE.stale(docs) == ["configuration.md", "rules/KG999.md"]
    assert sorted(GENERATE.write(docs)) == ["configuration.md", "rules/KG999.md"]
    assert GENERATE.stale(docs) == [] and not (docs / "rules" / "KG999.md").exists()


def test_the_reference_documents_every_key_and_every_rule_option() -> None:
    pages = GENERATE.pages()
    reference = pages["configuration.md"]
    for setting in (*schema.SETTINGS, *schema.TRITON, *schema.CUTE, *schema.CUDA):
        assert f"`{setting.key}`\n" in reference, setting.key
    for needle in ("### `timeout`", "### `jobs`", "86400"):
        assert needle in reference
    from kgate import rules as registry

    for rule in registry.all_rules():
        page = pages[f"rules/{rule.code}.md"]
        assert rule.doc.strip() in page and f"# {rule.code} {rule.name}\n" in page
        for name in rule.options:
            assert f"\n{name} = " in page, (rule.code, name)


# --------------------------------------------------------------------------- the parser reads the schema

def test_every_key_of_the_schema_is_read_by_the_parser(tmp_path: Path) -> None:
    assert set(TOP_SAMPLES) == schema.keys(schema.SETTINGS)
    (tmp_path / "a").mkdir()
    default = parse({}, tmp_path)
    for setting in schema.SETTINGS:
        got = parse({setting.key: TOP_SAMPLES[setting.key]}, tmp_path)
        assert getattr(got, setting.field) != getattr(default, setting.field), setting.key


@pytest.mark.parametrize(("settings", "required", "samples", "entry_of"), [
    (schema.TRITON, TRITON_REQUIRED, TRITON_SAMPLES, lambda c: c.triton[0]),
    (schema.CUTE, CUTE_REQUIRED, CUTE_SAMPLES, lambda c: c.cute[0]),
    (schema.CUDA, CUDA_REQUIRED, CUDA_SAMPLES, lambda c: c.cuda[0]),
], ids=["triton", "cute", "cuda"])
def test_every_key_of_an_entry_is_read_by_the_parser(tmp_path: Path, settings: tuple[schema.Setting, ...],
                                                     required: dict, samples: dict, entry_of: Any) -> None:
    assert set(samples) == schema.keys(settings)
    key = {id(schema.TRITON): "triton", id(schema.CUTE): "cute"}.get(id(settings), "cuda")
    default = entry_of(parse({key: [required]}, tmp_path))
    for setting in settings:
        entry = entry_of(parse({key: [{**required, setting.key: samples[setting.key]}]}, tmp_path))
        assert getattr(entry, setting.field) != getattr(default, setting.field), setting.key


def test_a_key_outside_the_schema_is_refused(tmp_path: Path) -> None:
    for table, key in (({"timeouts": 5}, "timeouts"), ({"triton": [{**TRITON_REQUIRED, "warps": 4}]}, "warps"),
                       ({"cuda": [{**CUDA_REQUIRED, "flag": []}]}, "flag")):
        with pytest.raises(ConfigError, match=f"{key}: unknown key"):
            parse(table, tmp_path)


@pytest.mark.parametrize(("settings", "model", "not_configured"), [
    (schema.SETTINGS, Config, {"root", "source", "notices", "checkout_of"}),
    (schema.TRITON, TritonEntry, {"origin"}),
    (schema.CUTE, CuteEntry, {"origin", "source", "captured"}),
    (schema.CUDA, CudaEntry, {"origin"}),
], ids=["top", "triton", "cute", "cuda"])
def test_every_field_is_set_by_a_key_and_defaults_agree(settings: tuple[schema.Setting, ...], model: type,
                                                        not_configured: set[str]) -> None:
    fields = {f.name: f for f in dataclasses.fields(model)}
    assert {s.field for s in settings} == set(fields) - not_configured
    for setting in settings:
        field = fields[setting.field]
        if setting.required or field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            continue
        default = field.default if field.default is not dataclasses.MISSING else field.default_factory()  # type: ignore[misc]
        assert plain(default) == plain(setting.default), setting.key


def test_triton_defaults_agree_where_the_entry_has_none(tmp_path: Path) -> None:
    # `signature` has no dataclass default: the parser fills it in (empty when `args` gives the arguments).
    entry = parse_triton_entry({"kernel": "pkg.mod:k", "args": {"n": 3}}, "test")
    assert entry.signature == schema.by_key(schema.TRITON, "signature").default


def test_the_keys_the_parser_names_are_keys_of_the_schema() -> None:
    """Every key written as a string where the parser reads a table is a key of the schema."""
    tree = ast.parse(Path(config_module.__file__).read_text(encoding="utf-8"))
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    scopes = {"parse_triton_entry": schema.TRITON, "parse_cuda_entry": schema.CUDA}
    for name, node in functions.items():
        if name in scopes:
            known = schema.keys(scopes[name])
            tables = {"data", "table"}
        elif name == "parse_config" or name.startswith("_read_"):
            known = schema.keys(schema.SETTINGS)
            tables = {"table"}
        else:
            continue
        for sub in ast.walk(node):
            key = None
            if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id in tables:
                key = sub.slice
            elif isinstance(sub, ast.Compare) and isinstance(sub.ops[0], ast.In) \
                    and isinstance(sub.comparators[0], ast.Name) and sub.comparators[0].id in tables:
                key = sub.left
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "get" \
                    and isinstance(sub.func.value, ast.Name) and sub.func.value.id in tables and sub.args:
                key = sub.args[0]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                assert key.value in known, f"{name} reads {key.value!r}, which the schema does not declare"
    assert set(config_module._SPECIAL) <= schema.keys(schema.SETTINGS)


# --------------------------------------------------------------------------- the JSON Schema

def _validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    document = schema.json_schema(GENERATE.rule_option_schemas(__import__("kgate.rules").rules.all_rules()))
    jsonschema.Draft202012Validator.check_schema(document)
    return jsonschema.Draft202012Validator(document)


def test_the_json_schema_describes_every_key() -> None:
    document = schema.json_schema()
    assert document["$schema"].endswith("/2020-12/schema") and document["additionalProperties"] is False
    top = document["properties"]
    assert set(top) == schema.keys(schema.SETTINGS)
    assert set(top["triton"]["items"]["properties"]) == schema.keys(schema.TRITON)
    assert set(top["cuda"]["items"]["properties"]) == schema.keys(schema.CUDA)
    assert top["triton"]["items"]["required"] == ["kernel"] and top["cuda"]["items"]["required"] == ["sources"]
    assert top["timeout"]["maximum"] == schema.MAX_TIMEOUT and top["jobs"]["minimum"] == 1
    for properties in (top, top["triton"]["items"]["properties"], top["cuda"]["items"]["properties"]):
        assert all(value.get("description") for value in properties.values())


def test_the_json_schema_accepts_what_the_parser_accepts(tmp_path: Path) -> None:
    validator = _validator()
    samples = {**TOP_SAMPLES, "triton": [{**TRITON_REQUIRED, **TRITON_SAMPLES}], "cuda": [CUDA_SAMPLES]}
    parse(samples, tmp_path)
    assert list(validator.iter_errors(samples)) == []
    assert list(validator.iter_errors(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["kgate"])) == []
    accepted = 0
    for path in sorted([*REPO.glob("fixtures/**/kgate.toml"), *REPO.glob("fixtures/**/pyproject.toml"),
                        *REPO.glob("tests/data/**/kgate.toml")]):
        try:
            config = load_config(path)
            build_selection(config)
        except (ConfigError, OSError):
            continue
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        table = data.get("tool", {}).get("kgate", {}) if path.name == "pyproject.toml" else data
        errors = [e.message for e in validator.iter_errors(table)]
        assert not errors, f"{path.relative_to(REPO)}: {errors}"
        accepted += 1
    assert accepted > 10


def test_the_json_schema_refuses_the_wrong_types_the_parser_refuses(tmp_path: Path) -> None:
    validator = _validator()
    cases = [({s.key: WRONG[s.kind]}, s.key) for s in schema.SETTINGS if s.kind in WRONG]
    cases += [({"triton": [{**TRITON_REQUIRED, s.key: WRONG[s.kind]}]}, s.key)
              for s in schema.TRITON if s.kind in WRONG]
    cases += [({"cuda": [{**CUDA_REQUIRED, s.key: WRONG[s.kind]}]}, s.key) for s in schema.CUDA if s.kind in WRONG]
    cases += [({"timeout": 0}, "timeout"), ({"timeout": 86401}, "timeout"), ({"jobs": 0}, "jobs"),
              ({"size-slack": -1}, "size-slack"), ({"triton": [{**TRITON_REQUIRED, "num_warps": 33}]}, "num_warps"),
              ({"options": {"launch-guard": {"window": "3"}}}, "options"),
              ({"options": {"launch-guard": {"windows": 3}}}, "options"),
              ({"cuda": [{**CUDA_REQUIRED, "torch": "yes"}]}, "torch"), ({"cuda": [{**CUDA_REQUIRED, "torch": 1}]}, "torch")]
    assert len(cases) > 30
    for table, key in cases:
        with pytest.raises(ConfigError, match=re.escape(key)):
            build_selection(parse(table, tmp_path))
        assert list(validator.iter_errors(table)), f"the JSON Schema accepts {table}"
