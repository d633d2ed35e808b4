"""A Makefile's `include`s are followed to the makefiles that hold its nvcc flags or architecture list: relative to
make's folder (that of the Makefile it runs, in the files it includes too), else beside the including file, each
once (a cycle ends), a name make expands is not guessed, and a missing plain `include` of a Makefile is listed (a
note of KG301), never an error."""

from __future__ import annotations

from pathlib import Path

from conftest import kgate

from kgate.collect.make_includes import includes


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_includes_make_s_folder_does_not_hold_are_read_beside_the_including_file_each_once(tmp_path: Path) -> None:
    _tree(tmp_path, {
        "build/Makefile": "X = 1\ninclude ../cfg/arch.mk common.mk\n-include gone.mk\nsinclude $(ROOT)/x.mk\n"
                          "include missing.mk\n\tinclude recipe.mk\n",
        "cfg/arch.mk": "include flags.mk\n",  # build/ holds no flags.mk: the one beside arch.mk
        "cfg/flags.mk": "include ../build/Makefile\ninclude ../cfg/arch.mk\n",  # cycles end
        "build/common.mk": "",
        "build/recipe.mk": "",
    })
    found, missing = includes(str(tmp_path / "build/Makefile"), "build/Makefile",
                              (tmp_path / "build/Makefile").read_text())
    assert [(f.rel, f.at) for f in found] == [("cfg/arch.mk", 2), ("cfg/flags.mk", 2), ("build/common.mk", 2)]
    assert [(m.line, m.name) for m in missing] == [(5, "missing.mk")]


def test_an_include_outside_the_project_is_read_without_a_project_path(tmp_path: Path) -> None:
    _tree(tmp_path, {"shared/arch.mk": "SM ?= 90\n", "project/Makefile": "include ../shared/arch.mk\n"})
    found, _missing = includes(str(tmp_path / "project/Makefile"), "Makefile", "include ../shared/arch.mk\n")
    assert [(f.rel, f.text) for f in found] == [("", "SM ?= 90\n")]


SOURCE = ('#pragma once\n__device__ inline void grow() { asm volatile("setmaxnreg.inc.sync.aligned.u32 240;" ::: '
          '"memory"); }\n')


def test_kgate_lint_judges_an_included_architecture_by_the_including_builds_sources(tmp_path: Path) -> None:
    _tree(tmp_path, {
        "kgate.toml": "select = [\"KG301\"]\n",
        "config/arch.mk": "# the build's architectures\nGPU_ARCH ?= sm_90\n",
        "gemm/Makefile": "include ../config/arch.mk\nNVCCFLAGS = -O3 -arch=$(GPU_ARCH)\n\n"
                         "k.o: k.cu\n\tnvcc $(NVCCFLAGS) -c k.cu\n",
        "gemm/k.cu": SOURCE,
    })
    run = kgate("lint", "--no-cache", cwd=tmp_path)
    assert run.code == 1, run.stdout + run.stderr
    assert "gemm/Makefile:1:1: KG301 error arch-target: `sm_90` (written at config/arch.mk:2" in run.stdout
    # The architecture in a makefile nothing includes names no build.
    (tmp_path / "gemm/Makefile").write_text("NVCCFLAGS = -O3\n\nk.o: k.cu\n\tnvcc $(NVCCFLAGS) -c k.cu\n")
    assert kgate("lint", "--no-cache", cwd=tmp_path).code == 0


def test_a_name_an_included_file_writes_is_read_from_make_s_folder(tmp_path: Path) -> None:
    _tree(tmp_path, {
        "Makefile": "include mk/arch.mk\n",
        "mk/arch.mk": "include mk/flags.mk\ninclude mk/gone.mk\n",  # make runs in the Makefile's folder
        "mk/flags.mk": "GENCODE = -gencode arch=compute_90,code=sm_90\n",
        "mk/mk/flags.mk": "",  # not what make reads
    })
    found, missing = includes(str(tmp_path / "Makefile"), "Makefile", (tmp_path / "Makefile").read_text())
    assert [(f.rel, f.at) for f in found] == [("mk/arch.mk", 1), ("mk/flags.mk", 1)]
    assert missing == []
    # A `.mk` file's own names are read from the folder of whichever Makefile includes it: none is missing for it.
    alone = includes(str(tmp_path / "mk/arch.mk"), "mk/arch.mk", (tmp_path / "mk/arch.mk").read_text())
    assert alone[1] == []


def test_kgate_lint_reads_the_architecture_of_a_makefile_an_included_one_includes(tmp_path: Path) -> None:
    _tree(tmp_path, {
        "kgate.toml": "select = [\"KG301\"]\n",
        "Makefile": "include mk/arch.mk\n\nk.o: k.cu\n\tnvcc -O3 $(GENCODE) -c k.cu\n",
        "mk/arch.mk": "include mk/flags.mk\n",
        "mk/flags.mk": "GENCODE = -gencode arch=compute_90,code=sm_90\n",
        "k.cu": SOURCE,
    })
    run = kgate("lint", "--no-cache", "--format", "json", cwd=tmp_path)
    assert run.code == 1, run.stdout + run.stderr
    assert {(f["path"], f["line"], f["severity"]) for f in run.json()["findings"]} == {("Makefile", 1, "error")}
