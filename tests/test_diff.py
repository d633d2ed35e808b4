"""`kgate diff`: the SASS of every kernel variant at two revisions, on a real git history.

One small repository (a Triton kernel and a CUDA file) with four commits: a configuration that does not
parse, the kernels, the same kernels with local variables renamed, and a tile size changed. The tests
check out the commit they need; the cache is shared, so each kernel compiles once per content.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect import revision
from kgate.diff.compare import first_difference, renamed_variants
from kgate.facts.listing import family, histogram, parse_listing, same_code

CONFIG = """targets = ["sm_120a"]
python-path = ["."]

[[cuda]]
sources = ["k.cu"]
"""

TRITON = '''import triton
import triton.language as tl

import kgate


@kgate.register(signature={{"x": "*fp32", "y": "*fp32", "n": "i32"}}, constexprs={{"BLOCK": {block}}}, num_warps=4)
@triton.jit
def scale(x, y, n, BLOCK: tl.constexpr):
    {offs} = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    {v} = tl.load(x + {offs}, mask={offs} < n)
    tl.store(y + {offs}, {v} * 2.0, mask={offs} < n)
'''

CUDA = """extern "C" __global__ void add_one(float* x, int n) {{
    int {i} = blockIdx.x * blockDim.x + threadIdx.x;
    if ({i} < n) x[{i}] += 1.0f;
}}
"""


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def _commit(repo: Path, message: str, files: dict[str, str]) -> str:
    for name, text in files.items():
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    repo = tmp_path_factory.mktemp("diff") / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / ".gitignore").write_text(".kgate-cache/\n")
    commits = {
        "broken": _commit(repo, "a configuration that does not parse", {"kgate.toml": "targets = [\n"}),
        "kernels": _commit(repo, "kernels", {"kgate.toml": CONFIG, "ops.py": TRITON.format(block=256, offs="offs", v="v"),
                                             "k.cu": CUDA.format(i="i")}),
        "renamed": _commit(repo, "rename locals", {"ops.py": TRITON.format(block=256, offs="idx", v="value"),
                                                   "k.cu": CUDA.format(i="index")}),
        "tile": _commit(repo, "a wider tile", {"ops.py": TRITON.format(block=1024, offs="idx", v="value")}),
    }
    scratch = tmp_path_factory.mktemp("tmpdir")
    return {"repo": repo, "commits": commits, "env": {"TMPDIR": str(scratch)}, "tmp": scratch}


def _at(history: dict[str, object], name: str) -> Path:
    repo = history["repo"]
    assert isinstance(repo, Path)
    _git(repo, "checkout", "-q", "--detach", history["commits"][name])  # type: ignore[index]
    return repo


def _left_behind(history: dict[str, object]) -> list[str]:
    repo, scratch = history["repo"], history["tmp"]
    assert isinstance(repo, Path) and isinstance(scratch, Path)
    worktrees = [line for line in _git(repo, "worktree", "list", "--porcelain").splitlines()
                 if line.startswith("worktree ")]
    return worktrees[1:] + [p.name for p in scratch.iterdir() if p.name.startswith(revision.CHECKOUT_PREFIX)]


def test_renaming_local_variables_leaves_every_variant_identical(history: dict[str, object]) -> None:
    repo = _at(history, "renamed")
    run = kgate("diff", "HEAD~1", "--require-identical", "--format", "json", cwd=repo, env=history["env"])
    assert run.code == 0, run.stderr
    data = run.json()
    statuses = {(v["language"], v["status"]) for v in data["variants"]}
    assert statuses == {("triton", "identical"), ("cuda", "identical")}
    assert data["identical"] is True and data["counts"]["identical"] == len(data["variants"])
    # Both sides compiled: the edit changed the source of both kernels, so nothing was read from the other side.
    assert data["base"]["label"].startswith("HEAD~1 (") and data["head"]["label"] == "working tree"
    # The cubins differ (their line tables name other lines), their machine code does not: nothing was
    # disassembled to tell. (This test runs first on the module's fresh cache.)
    assert not list((repo / ".kgate-cache" / "v1").glob("listing/*.json"))
    assert _left_behind(history) == []


def test_a_tile_size_change_changes_exactly_that_kernels_variants(history: dict[str, object]) -> None:
    repo = _at(history, "tile")
    run = kgate("diff", "--format", "json", cwd=repo, env=history["env"])  # the default base: HEAD~1 on main
    assert run.code == 0, run.stderr
    rows = {v["language"]: v for v in run.json()["variants"]}
    assert set(rows) == {"triton", "cuda"} and rows["cuda"]["status"] == "identical"
    changed = rows["triton"]
    # BLOCK 256 -> 1024 renames the variant; it is still compared with what it was.
    assert changed["status"] == "changed" and "BLOCK=1024" in changed["variant"]
    assert "BLOCK=256" in changed["base_variant"]
    assert changed["before"]["instructions"] != changed["after"]["instructions"] or changed["families"]
    assert {line["sign"] for line in changed["lines"]} & {"-", "+"}
    assert any(line["source"].startswith("ops.py:") for line in changed["lines"])

    gate = kgate("diff", "HEAD~1", "--require-identical", cwd=repo, env=history["env"])
    assert gate.code == 1
    assert "changed  ops:scale" in gate.stdout and "first difference at instruction" in gate.stdout
    only_cuda = kgate("diff", "HEAD~1", "--require-identical", "--kernel", "add_one", cwd=repo, env=history["env"])
    assert only_cuda.code == 0, only_cuda.stdout + only_cuda.stderr
    markdown = kgate("diff", "HEAD~1", "--format", "markdown", cwd=repo, env=history["env"])
    assert "| changed | `ops:scale` |" in markdown.stdout and "<details>" in markdown.stdout
    assert _left_behind(history) == []


def test_the_audit_page_shows_a_changed_variant_side_by_side(history: dict[str, object], tmp_path: Path) -> None:
    repo = _at(history, "tile")
    run = kgate("audit", "--diff", "HEAD~1", "-o", str(tmp_path / "audit"), cwd=repo, env=history["env"])
    assert run.code == 0, run.stderr
    md = (tmp_path / "audit" / "report.md").read_text()
    section = md[md.index("## SASS against HEAD~1 ("):]
    assert "| changed | `ops:scale` |" in section
    assert re.search(r"^### ops:scale \[[^\]\n]*stages=[^\]\n]*\] @ sm_120a$", section, re.MULTILINE)
    side = [line for line in section.splitlines() if line.startswith(("| ~ |", "|  |"))]
    assert any(line.startswith("| ~ |") for line in side) and any("ops.py:" in line for line in side)
    page = (tmp_path / "audit" / "report.html").read_text()
    assert '<section id="sass-diff">' in page and '<table class="sass">' in page
    assert _left_behind(history) == []


@pytest.mark.parametrize("where, args, message", [
    ("kernels", ("HEAD~1",), "the base revision HEAD~1 cannot be configured"),
    ("kernels", ("no-such-rev",), "unknown revision 'no-such-rev'"),
    ("kernels", ("HEAD~1", "--triton", "3.5.1"), "not both"),
])
def test_errors_are_one_line_and_exit_2(history: dict[str, object], where: str, args: tuple[str, ...],
                                        message: str) -> None:
    repo = _at(history, where)
    run = kgate("diff", *args, cwd=repo, env=history["env"])
    assert run.code == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("kgate: error: ") and message in run.stderr
    assert _left_behind(history) == []


def test_outside_a_git_repository_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text(CONFIG)
    run = kgate("diff", cwd=tmp_path, env={"GIT_CEILING_DIRECTORIES": str(tmp_path.parent)})
    assert run.code == 2 and run.stderr.startswith("kgate: error: ") and "not in a git repository" in run.stderr


def test_the_default_base_is_the_merge_base_off_the_default_branch(history: dict[str, object]) -> None:
    repo = _at(history, "tile")
    assert revision.default_base(repo) == ("HEAD~1", "HEAD~1")  # detached on main's tip: the last commit
    _git(repo, "checkout", "-q", "-b", "feature", history["commits"]["renamed"])  # type: ignore[index]
    try:
        (repo / "notes.txt").write_text("x")
        _commit(repo, "a change on a branch", {})
        assert revision.default_base(repo) == (history["commits"]["renamed"], "merge base with main")  # type: ignore[index]
    finally:
        _git(repo, "checkout", "-q", "--detach", "main")
        _git(repo, "branch", "-q", "-D", "feature")


def test_the_checkout_is_removed_when_the_run_is_interrupted(history: dict[str, object]) -> None:
    repo = _at(history, "tile")
    commit = history["commits"]["kernels"]  # type: ignore[index]
    with pytest.raises(KeyboardInterrupt), revision.checkout(repo, commit) as tree:
        assert (tree / "ops.py").is_file()
        raise KeyboardInterrupt
    assert not tree.exists() and not tree.parent.exists()
    assert len(_git(repo, "worktree", "list").splitlines()) == 1


LISTING = """
//--------------------- .text.{name}  --------------------------
\t.section\t.text.{name},"ax",@progbits
{name}:
\t//## File "{root}/ops.py", line 9
        /*{a0}*/                   LDC R1, c[0x0][{bank}] ;               /* 0x0000df00ff017b82 */
                                                                       /* 0x000e220000000800 */
        /*{a1}*/              @!P0 BRA `(.L_x_{label}) ;                  /* 0x0000000000048947 */
                                                                       /* 0x000fea0003800000 */
.L_x_{label}:
\t//## File "{root}/ops.py", line 11
        /*{a2}*/                   STG.E.128 desc[UR4][R2.64], R4 ;       /* 0x0000000402007986 */
                                                                       /* 0x000fe2000c101d04 */
"""


def _listing(**changes: str) -> tuple:
    values = {"name": "scale", "root": "/a", "a0": "0000", "a1": "0010", "a2": "0020", "bank": "0x37c", "label": "3"}
    values.update(changes)
    return parse_listing(LISTING.format(**values))[values["name"]]


def test_listings_compare_equal_apart_from_addresses_symbols_and_paths() -> None:
    base = _listing()
    assert [i.opcode for i in base] == ["LDC", "BRA", "STG.E.128"]
    assert same_code(_listing(a0="0100", a1="0110", a2="0120", label="7", root="/b", name="other"), base)
    moved = _listing(bank="0x380")  # a constant-bank offset is part of the code
    assert not same_code(moved, base)
    first, lines = first_difference(base, moved, ("/a",))
    assert first == 0 and [ln.sign for ln in lines] == ["-", "+", " ", " "] and lines[0].source == "ops.py:9"
    assert histogram(base) == {"STG.128": 1, "total": 3}


def test_opcode_families() -> None:
    assert [family(op) for op in ("HMMA.16816.F32.BF16", "LDG.E.128", "LDG.E", "LDG.E.U8", "LDS.U.64", "LDL.64",
                                  "STL", "BAR.SYNC.DEFER_BLOCKING", "ACQBULK", "FFMA")] == \
        ["HMMA.16816.F32.BF16", "LDG.128", "LDG.32", "LDG.8", "LDS.64", "LDL", "STL", "BAR", "griddepcontrol", None]


def test_a_variant_renamed_by_one_constexpr_is_paired_but_not_guessed() -> None:
    gone = [("m:k", "BLOCK=256,warps=4,stages=3,fp32#00000000", "sm_120a")]
    new = [("m:k", "BLOCK=1024,warps=4,stages=3,fp32#00000000", "sm_120a")]
    assert renamed_variants(gone, new) == {new[0]: gone[0]}
    two = new + [("m:k", "BLOCK=2048,warps=4,stages=3,fp32#00000000", "sm_120a")]
    assert renamed_variants(gone, two) == {}  # which one it became is not known
    assert renamed_variants(gone, [("m:k", "BLOCK=1024,warps=4,stages=3,fp16#00000000", "sm_120a")]) == {}


@pytest.mark.skipif(os.environ.get("KGATE_TEST_MATRIX") != "1",
                    reason="downloads Triton 3.5.1 into an environment of its own; set KGATE_TEST_MATRIX=1")
def test_another_triton_release_is_compared_on_the_working_tree(history: dict[str, object], tmp_path: Path) -> None:
    repo = _at(history, "tile")
    env = {**history["env"],  # type: ignore[dict-item]
           "KGATE_TOOLCHAINS": os.environ.get("KGATE_TEST_TOOLCHAINS", str(tmp_path / "toolchains"))}
    run = kgate("diff", "--triton", "3.5.1", "--format", "json", cwd=repo, env=env, timeout=3600)
    assert run.code == 0, run.stderr
    data = run.json()
    assert data["base"]["label"] == "Triton 3.5.1" and data["base"]["toolchain"]["triton"] == "3.5.1"
    assert data["head"]["label"] == f"Triton {data['head']['toolchain']['triton']}"
    # Only Triton kernels: the CUDA file's compiler is the same on both sides.
    assert [(v["kernel"], v["status"] in ("identical", "changed")) for v in data["variants"]] == [("ops:scale", True)]


def test_every_report_escapes_project_text() -> None:
    from dataclasses import replace

    from test_audit_model import audit, facts

    from kgate.diff.compare import compare
    from kgate.diff.model import Side
    from kgate.report import audit_html, audit_md, diff_report

    evil = "pkg.k:<b>x</b>|\x1b[31m"
    old = (facts(evil, variant="B=1|<i>"),)
    new = (replace(old[0], resources=replace(old[0].resources, registers=200)),)
    base = Side("HEAD~1 (<script>)", {f.key: f for f in old}, cubins={old[0].key: ("a", "1")})
    head = Side("working tree", {f.key: f for f in new}, cubins={new[0].key: ("b", "2")})
    text = "LDG.E R1, [R2] ; <img src=x> | `"
    listing = {"a": parse_listing(LISTING.format(name="n", root="/a", a0="0", a1="1", a2="2", bank="0x1",
                                                 label="1"))["n"],
               "b": parse_listing(LISTING.format(name="n", root="/a", a0="0", a1="1", a2="2", bank="0x2",
                                                 label="1"))["n"]}
    listing = {k: tuple(replace(i, text=text + i.text) if n == 0 else i for n, i in enumerate(v))
               for k, v in listing.items()}
    diff = compare(base, head, lambda side, key: listing[side.cubins[key][0]], pairs=1)
    assert [r.status for r in diff.rows] == ["changed"]
    shown = diff_report.render_terminal(diff)
    assert "\x1b" not in shown
    md = diff_report.render_markdown(diff)
    assert "<b>" not in _outside_code(md) and "<script>" not in md and "\\|" in md.split("<details>")[0]
    model = replace(audit(*new), sass_diff=diff)
    page = audit_html.render(model)
    assert "<img" not in page and "<script>" not in page.split("<script>")[0] + page.split("</script>")[-1]
    assert "&lt;img src=x&gt;" in page
    report = audit_md.render(model)
    assert "<img" not in _outside_code(report) and "<b>" not in _outside_code(report)


def _outside_code(markdown: str) -> str:
    """Markdown without its code spans and fenced blocks, where any text is shown as it is."""
    import re

    markdown = re.sub(r"^(`{3,})diff\n.*?^\1$", "", markdown, flags=re.DOTALL | re.MULTILINE)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", markdown)


def test_a_change_of_the_total_alone_prints_no_empty_families_line() -> None:
    """An arithmetic instruction more (no family of its own) moves only the total: the row says so in its
    figures, with no blank line where the families would be."""
    from kgate.diff.compare import Diff, Row
    from kgate.diff.model import Side
    from kgate.report import diff_report

    row = Row("pkg.k:f", "B=1", "sm_120a", "triton", "changed", families={"total": (176, 184)})
    shown = diff_report.render_terminal(Diff(Side("base"), Side("head"), [row]))
    assert not [line for line in shown.splitlines() if line and not line.strip()], shown
