"""What a cold check of CUDA sources does after each compile, on real nvcc output.

The SASS a rule reads is taken from one disassembly of the whole cubin (the same instructions `cuobjdump -fun`
gives per function), the facts are read in the compile worker right after its compile, the longest compile starts
first, and PTX is split into functions in one pass (the same functions as the brace-by-brace splitter it replaced).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURES, copy_project, kgate

import kgate.facts.run as facts_run
from kgate.collect.cuda_sources import cuda_sources
from kgate.compile import cuda_engine, disassembly
from kgate.compile.cuda_backend import disassemble_functions
from kgate.compile.units import Compiled
from kgate.core.config import load_config
from kgate.facts import ptx
from kgate.facts.extract import Sources
from kgate.facts.model import KernelFacts
from kgate.facts.numbers import count
from kgate.facts.sass import local_in_loops, parse_sass
from kgate.support.tools import bundled_tool

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None or bundled_tool("cuobjdump") is None,
                                reason="nvcc and cuobjdump are needed")
GENCODE = "--generate-code=arch=compute_120a,code=sm_120a"
# Kernels with stack frames used in loops, PDL waits, block-scaled MMA, templates and an anonymous namespace.
SOURCES = ("spill.cu", "pdl.cu", "block_scale.cu", "templates.cu")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Each fixture source compiled by nvcc as kgate compiles it: its cubin and its PTX."""
    out = {}
    folder = tmp_path_factory.mktemp("nvcc")
    for name in SOURCES:
        cubin = folder / f"{name}.cubin"
        subprocess.run(["nvcc", "-I.", "-std=c++17", "-O3", "-cubin", "-lineinfo", GENCODE, "--keep", "--keep-dir",
                        str(folder), "-o", str(cubin), name], cwd=FIXTURES / "cuda", check=True, capture_output=True)
        out[name] = (cubin, (folder / f"{Path(name).stem}.ptx").read_text())
    return out


def _cuobjdump(*args: str) -> str:
    return subprocess.run([str(bundled_tool("cuobjdump")), *args], check=True, capture_output=True, text=True).stdout


def _instructions(listing: str) -> dict[str, list[str]]:
    """Each function's instruction lines, without the encoding words and the spacing."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in listing.splitlines():
        if line.strip().startswith("Function :"):
            current = found.setdefault(line.split(":", 1)[1].strip(), [])
        elif current is not None and line.strip().startswith("/*") and not line.strip().startswith("/* 0x"):
            current.append(" ".join(line.split("/* 0x")[0].split()))
    return found


@pytest.mark.parametrize("name", SOURCES)
def test_whole_cubin_disassembly_gives_each_function_what_fun_gives(built: dict, name: str) -> None:
    cubin, _text = built[name]
    symbols = sorted(_instructions(_cuobjdump("-sass", str(cubin))))
    assert symbols
    for asked in (symbols, symbols[:1], symbols[len(symbols) // 2:]):
        fun = _cuobjdump("-sass", "-fun", ",".join(asked), str(cubin))
        ours = disassemble_functions(cubin, asked)
        assert _instructions(ours) == _instructions(fun)
        assert set(_instructions(ours)) == set(asked)
        assert parse_sass(ours) == parse_sass(fun)
        assert local_in_loops(ours) == local_in_loops(fun)
        assert "/* 0x" not in ours  # the encoding words are left out


@pytest.mark.parametrize("name", SOURCES)
def test_nvdisasm_of_the_functions_wanted_is_the_whole_cuobjdump_listing_byte_for_byte(built: dict, name: str) -> None:
    """`nvdisasm -fun` names branch targets by labels: each is replaced by its address, as cuobjdump prints it. Where
    nvdisasm writes columns (older tools), the SASS is cuobjdump's own: the same bytes under every toolkit."""
    cubin, _text = built[name]
    whole = _cuobjdump("-sass", str(cubin))
    symbols = sorted(_instructions(whole))
    listing = subprocess.run([str(bundled_tool("nvdisasm")), "-c", str(cubin)], check=True, capture_output=True,
                             text=True).stdout
    for asked in (symbols, symbols[:1], symbols[len(symbols) // 2:], [*symbols[:2], "not_a_function"]):
        assert disassemble_functions(cubin, asked) == disassembly.sass_functions(whole, asked)
        ours = disassembly._nvdisasm_functions(cubin, asked)
        assert (ours is None) == disassembly.in_columns(listing)  # nvdisasm's text wherever it is not in columns
        assert ours is None or ours == disassembly.sass_functions(whole, asked)
    assert "`(" in listing or name != "spill.cu"  # the loops' branches name labels


# One instruction as each toolkit's nvdisasm prints it: CUDA 12's with its scheduling fields, padded into columns
# as wide as the longest text listed; CUDA 13's without them.
IN_COLUMNS = ("        /*0200*/                   BRA.U !UP0, `(.L_x_0)                                 ?trans5;\n"
              "        /*0210*/                   LDC R20, c[0x0][0x394]          &wr=0x1          ?trans1;\n")
PLAIN = ("        /*0200*/                   BRA.U !UP0, `(.L_x_0) ;\n"
         "        /*1950*/                   MUFU.RSQ R3, -QNAN  ;\n")


def test_a_listing_in_columns_is_not_taken_for_cuobjdumps() -> None:
    """Columns are as wide as the longest text of all that was listed (the whole cubin for cuobjdump, the functions
    named for nvdisasm, its labels at their own length): a listing in columns gives no cuobjdump text."""
    assert disassembly.in_columns(IN_COLUMNS) and disassembly.in_columns(IN_COLUMNS.splitlines()[1])
    assert not disassembly.in_columns(PLAIN)  # an operand's own spacing is no column


@pytest.mark.skipif(bundled_tool("nvdisasm") is None, reason="nvdisasm is needed")
def test_an_nvdisasm_that_writes_columns_is_run_once(built: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once an nvdisasm is found to write columns, its cubins go to cuobjdump without running it again."""
    cubin, _text = built["spill.cu"]
    ran: list[str] = []
    real = disassembly.tools.run

    def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        ran.append(Path(argv[0]).name)
        return real(argv, **kwargs)

    monkeypatch.setattr(disassembly.tools, "run", run)
    monkeypatch.setattr(disassembly, "_COLUMNS", {})
    symbols = sorted(_instructions(_cuobjdump("-sass", str(cubin))))
    first = disassemble_functions(cubin, symbols)
    assert first == disassemble_functions(cubin, symbols)
    columns = disassembly._COLUMNS[disassembly.tools.file_identity(bundled_tool("nvdisasm"))]
    assert ran == (["nvdisasm", "cuobjdump", "cuobjdump"] if columns else ["nvdisasm", "nvdisasm"])


def test_a_label_outside_its_section_gives_no_nvdisasm_text() -> None:
    """A target nvdisasm names that the section does not define: the whole cubin is listed by cuobjdump instead."""
    listing = ("\t.section\t.text.k,\"ax\",@progbits\n.L_x_0:\n        /*0000*/                   BRA `(.L_x_0);\n"
               "        /*0010*/                   CALL.REL.NOINC `(other) ;\n")
    assert disassembly._as_cuobjdump(listing, {"k"}) is None
    one = listing.split("        /*0010*/")[0]
    assert disassembly._as_cuobjdump(one, {"k"}) == "Function : k\n/*0000*/                   BRA 0x0;\n"


def _old_split_functions(text: str) -> list[tuple[str, str, str, int]]:
    """The splitter as it was: braces matched one character at a time, lines counted from the top each time."""
    out = []
    for match in ptx._FUNC_HEAD.finditer(text):
        kind, name = match.group(1), match.group(2)
        start = text.find("{", match.end())
        semi = text.find(";", match.end())
        if start < 0 or (0 <= semi < start):
            continue
        depth = 0
        end = start
        for end in range(start, len(text)):
            ch = text[end]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    break
        first_line = text.count("\n", 0, start) + 1
        out.append((kind, name, text[start + 1: end], first_line))
    return out


def _old_first_locs(text: str) -> dict[str, ptx.SourceLoc | None]:
    files = {count(n): name for n, name in ptx.FILE.findall(text)}
    out = {}
    for match in ptx._FUNC_HEAD.finditer(text):
        start = text.find("{", match.end())
        semi = text.find(";", match.end())
        if match.group(1) != "entry" or start < 0 or 0 <= semi < start:
            continue
        first = None
        for line in text[start:].split("\n", 400)[:400]:
            loc = ptx.LOC.match(line)
            if loc:
                file_no, src_line, col = (count(g) for g in loc.groups())
                if src_line:
                    first = ptx.SourceLoc(files.get(file_no, str(file_no)), src_line, col)
                    break
        out[match.group(2)] = first
    return out


EDGES = [
    ".visible .entry a()\n{\n ret;\n}\n.func b;\n.func (.param .b32 r) c(.param .b32 x)\n{\n{\n ret;\n}\n}\n",
    ".entry open()\n{\n ld.global.u32 %r1, [%rd1];\n{\n",  # a body never closed: to the end of the text
    "}\n}\n.entry after_stray()\n{\n ret;\n}\n.extern .func ext(.param .b32 x);\n",
    ".entry first_loc()\n{\n" + ".reg .b32 %r<2>;\n" * 398 + ".loc 1 7 3\n ret;\n}\n.entry far()\n{\n"
    + ".reg .b32 %r<2>;\n" * 400 + ".loc 1 9 1\n ret;\n}\n",
]


@pytest.mark.parametrize("name", SOURCES)
def test_the_one_pass_splitter_equals_the_old_one_on_real_ptx(built: dict, name: str) -> None:
    text = built[name][1]
    assert ptx._split_functions(text) == _old_split_functions(text)
    assert {n: h.first_loc for n, h in ptx.entry_headers(text).items()} == _old_first_locs(text)


@pytest.mark.parametrize("text", EDGES)
def test_the_one_pass_splitter_equals_the_old_one_on_odd_text(text: str) -> None:
    assert ptx._split_functions(text) == _old_split_functions(text)
    assert {n: h.first_loc for n, h in ptx.entry_headers(text).items()} == _old_first_locs(text)


def test_compiles_start_longest_first(tmp_path: Path) -> None:
    project = copy_project("cuda", tmp_path)
    config = load_config(project / "kgate.toml")
    tasks = [cuda_engine._Task(source, "sm_120a", source.rel, {}) for source in cuda_sources(config)]
    size = {t.source.rel: cuda_engine._text_size(t.source) for t in tasks}
    by_size = sorted(size, key=lambda rel: -size[rel])
    assert by_size != sorted(by_size)  # the files' own order is not the one by size

    def order(durations: dict[str, float]) -> list[str]:
        return [t.source.rel for t in cuda_engine.longest_first(tasks, durations)]

    # Nothing recorded: the largest text first.
    assert order({}) == by_size
    # Every file recorded: the recorded seconds decide, whatever the sizes.
    assert order({f"cuda:{rel}": float(n) for n, rel in enumerate(by_size)}) == by_size[::-1]
    # One recorded: the others are estimated at its seconds per byte, so a larger file still goes before it.
    small, large = by_size[-1], by_size[0]
    slow = {f"cuda:{small}": size[small] * 1e6}
    assert order(slow).index(large) < order(slow).index(small)


def test_a_cold_check_reads_facts_in_the_compile_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The main process parses no fresh unit (its worker did, and kept the facts), and the report is the one
    the main process makes when it reads every unit itself."""
    project = copy_project("cuda", tmp_path)
    parsed: list[str] = []
    build = facts_run.unit_facts

    def counted(unit: Compiled, src: Sources, model: type[KernelFacts]) -> list:
        parsed.append(unit.context["rel"])
        return build(unit, src, model)

    monkeypatch.setattr(facts_run, "unit_facts", counted)
    in_workers = kgate("check", "--format", "json", "--no-cache", cwd=project)
    assert in_workers.code == 1, in_workers.stderr
    assert parsed == []
    monkeypatch.setattr(facts_run, "WorkerFacts", lambda *_args: None)  # no analysis in the workers
    in_main = kgate("check", "--format", "json", "--no-cache", cwd=project)
    assert sorted(set(parsed)) == sorted({k["variant"] for k in in_main.json()["kernels"]})
    assert in_main.stdout == in_workers.stdout


def test_the_cache_keeps_only_the_sass_of_the_functions_a_rule_reads(tmp_path: Path) -> None:
    project = copy_project("cuda", tmp_path)
    run = kgate("check", "--format", "json", cwd=project)
    assert run.code == 1, run.stderr
    records = [json.loads(p.read_text())["value"] for p in (project / ".kgate-cache" / "v1" / "cuda").glob("*.json")]
    with_sass = [r for r in records if "sass" in r.get("artifacts", {})]
    assert with_sass
    for path in (project / ".kgate-cache" / "v1" / "artifacts").glob("*/kernel.sass"):
        listing = path.read_text()
        functions = [line.split(":", 1)[1].strip() for line in listing.splitlines() if line.startswith("Function")]
        assert functions and all(line.startswith(("Function : ", "/*")) for line in listing.splitlines())
        assert "/* 0x" not in listing
        asked = [r["sass_symbols"] for r in with_sass if r["artifacts"]["sass"] == _sha256(path)]
        assert asked and sorted(functions) == sorted(asked[0])


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_facts_written_to_the_cache_are_what_asdict_gives(tmp_path: Path) -> None:
    """`KernelFacts.to_json` builds the record without asdict's deep copies: the same values, of the same types."""
    from dataclasses import asdict

    project = copy_project("cuda", tmp_path)
    assert kgate("check", "--format", "json", cwd=project).code == 1
    records = [json.loads(p.read_text())["value"] for p in (project / ".kgate-cache" / "v1" / "facts").glob("*.json")]
    facts = [KernelFacts.from_json(data) for record in records for _symbol, data in record["kernels"]]
    assert any(item.sass is not None for item in facts) and any(item.entry.unwaited_accesses for item in facts)
    for item in facts:
        ours, theirs = item.to_json(), asdict(item)
        assert ours == theirs and repr(ours) == repr(theirs)
