"""A build script's nvcc flags are taken only where its text settles them: a list the script replaces, takes items
from or reorders, a name bound again by any means (a function's parameter, `:=`, `with ... as`, `import ... as`,
`del`), and a `**mapping` that may give "nvcc" after the literal key are unsettled, never read as their first
value. A list the script only adds to keeps its first items (they are still there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgate.collect.torch_builds import by_source, torch_builds

EXTENSION = "CUDAExtension('x', ['k.cu'], extra_compile_args={'nvcc': F})\n"


def _build(root: Path, script: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    (root / "k.cu").write_text("// source\n")
    (root / "setup.py").write_text("import os\nfrom torch.utils.cpp_extension import CUDAExtension\n" + script)
    found = by_source(torch_builds(root, [root / "k.cu"])).get((root / "k.cu").resolve())
    return (found.flags, found.unsettled) if found else None


@pytest.mark.parametrize("script", [
    "F = ['-O3', '-DHEADDIM=64']\nif os.environ.get('BIG'):\n    F = ['-O3', '-DHEADDIM=256']\n" + EXTENSION,
    "F = ['-O3', '-DHEADDIM=64']\nif os.environ.get('EXACT'):\n    F.remove('-DHEADDIM=64')\n" + EXTENSION,
    "F = ['-O3', '-DHEADDIM=64']\nif os.environ.get('EXACT'):\n    del F[-1]\n" + EXTENSION,
    "F = ['-O3', '-DHEADDIM=64']\nF[1] = '-DHEADDIM=' + os.environ['D']\n" + EXTENSION,
    "F = ['-O3', '-DHEADDIM=64']\nF.pop()\n" + EXTENSION,
    "F = ['-O3', '-DHEADDIM=64']\n\n\ndef ext(F):\n    return " + EXTENSION + "ext(['-DHEADDIM=256'])\n",
    "F = ['-O3', '-DHEADDIM=64']\nif (F := ['-DHEADDIM=256']):\n    pass\n" + EXTENSION,
    "F = ['-O3', '-DHEADDIM=64']\nwith open('flags') as F:\n    pass\n" + EXTENSION,
    "F = ['-O3', '-DHEADDIM=64']\nfrom flags import NVCC as F\n" + EXTENSION,
])
def test_a_list_the_script_replaces_or_takes_from_is_unsettled_not_its_first_value(tmp_path: Path,
                                                                                    script: str) -> None:
    found = _build(tmp_path, script)
    assert found is not None and "-DHEADDIM=64" not in found[0] and found[1] == ("F",), found


def test_a_list_the_script_only_adds_to_keeps_its_first_items(tmp_path: Path) -> None:
    found = _build(tmp_path, "F = ['-O3', '-DHEADDIM=64']\nif os.environ.get('FAST'):\n    F.append('--use_fast_math')\n"
                   + EXTENSION)
    assert found == (("-O3", "-DHEADDIM=64"), ("F",))


@pytest.mark.parametrize(("arguments", "unsettled"), [
    ("{'nvcc': ['-DHEADDIM=64'], **BASE}", "json.load(open('flags.json'))"),
    ("{**BASE}", "json.load(open('flags.json'))"),
])
def test_a_mapping_spread_after_the_nvcc_key_may_replace_it(tmp_path: Path, arguments: str, unsettled: str) -> None:
    script = (f"import json\nBASE = json.load(open('flags.json'))\n"
              f"CUDAExtension('x', ['k.cu'], extra_compile_args={arguments})\n")
    assert _build(tmp_path, script) == ((), (unsettled,))


def test_a_mapping_spread_before_the_nvcc_key_is_replaced_by_it(tmp_path: Path) -> None:
    script = ("import json\nBASE = json.load(open('flags.json'))\n"
              "CUDAExtension('x', ['k.cu'], extra_compile_args={**BASE, 'nvcc': ['-DHEADDIM=64']})\n")
    assert _build(tmp_path, script) == (("-DHEADDIM=64",), ())


def test_an_option_one_build_of_a_shared_source_gives_and_the_other_not_is_named(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("// source\n")
    (tmp_path / "a.py").write_text('from torch.utils.cpp_extension import load\n'
                                   'load("a", ["k.cu"], extra_cuda_cflags=["-DHEADDIM=64", "-O3", "--maxrregcount", '
                                   '"64"])\n')
    (tmp_path / "b.py").write_text('from torch.utils.cpp_extension import load\n'
                                   'load("b", ["k.cu"], extra_cuda_cflags=["-DHEADDIM=128", "-O3"])\n')
    [build] = by_source(torch_builds(tmp_path, [tmp_path / "k.cu"])).values()
    assert build.flags == ("-O3",)
    assert build.unsettled == ("-DHEADDIM=64", "--maxrregcount 64", "-DHEADDIM=128"), build.unsettled
    assert "-DHEADDIM=64, --maxrregcount 64, -DHEADDIM=128" in build.note(tmp_path)
