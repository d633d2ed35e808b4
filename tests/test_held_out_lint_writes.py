"""Held-out cases for the writes of `kgate lint --fix`: a file that is no longer a regular file when its fix is
written (a FIFO put in its place after the fixer read it) is left as it is, and the run says so instead of waiting
for a writer that never comes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import after_read, kgate

from kgate.pipeline import fix

CONFIG = '[tool.kgate]\ntargets = ["sm_120a"]\njobs = 1\n'
STALE = "cmake_minimum_required(VERSION 3.24)\nset(CMAKE_CXX_STANDARD 17)  # kgate: ignore[KG301] stale\n"
BLOCK_SCALED = ('__device__ void mma() {\n  asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale'
                '.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0 {};");\n}\n__global__ void k() {}\n')


def fifo_in_place(path: str) -> None:
    """Another program puts a FIFO in the file's place."""
    os.unlink(path)
    os.mkfifo(path)


def test_a_file_that_became_a_fifo_after_the_fixer_read_it_is_not_written(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "mma.cu").write_text(BLOCK_SCALED)
    (tmp_path / "CMakeLists.txt").write_text(STALE)
    after_read(monkeypatch, "CMakeLists.txt", 2, fifo_in_place)
    # A stale suppression is fixed from the directive the lint's result holds: the fixer reads the file once more
    # only to see that it still holds the bytes of that result, and the FIFO comes after that read.
    real = fix._unchanged

    def unchanged(path: str, digest: str) -> bytes | None:
        data = real(path, digest)
        if path.endswith("CMakeLists.txt") and data is not None:
            fifo_in_place(path)
        return data

    monkeypatch.setattr(fix, "_unchanged", unchanged)
    run = kgate("lint", "--no-cache", "--fix", cwd=tmp_path, timeout=20)
    assert "CMakeLists.txt: " in run.stderr and "no longer a regular file: not written" in run.stderr, run.stderr
    assert (tmp_path / "CMakeLists.txt").is_fifo()


def test_the_fixers_second_read_of_a_file_that_became_a_fifo_does_not_wait_for_a_writer(tmp_path: Path) -> None:
    """The fixer reads a file once more to see that it still holds the bytes its lint result was made from: opened
    plainly, a named pipe in the file's place waited for a writer that never comes."""
    import threading

    pipe = tmp_path / "CMakeLists.txt"
    os.mkfifo(pipe)
    answer: list[bytes | None] = []
    reader = threading.Thread(target=lambda: answer.append(fix._unchanged(str(pipe), "0" * 64)), daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive() and answer == [None]
