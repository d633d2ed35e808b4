"""CUDA kernels are shown and keyed by their names without the return type, whatever the return type is: a
kernel constrained with `std::enable_if` (SFINAE) demangles with that type in front of its name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect.cuda_names import display_names, strip_return_type

SOURCE = """\
#include <type_traits>
namespace ops {
template <int N>
__global__ typename std::enable_if<(N > 0), void>::type kern(float* x) { x[threadIdx.x] *= N; }
template <typename T>
__global__ std::enable_if_t<std::is_same<T, float>::value> other(T* x) { x[0] = 1; }
template <typename T>
__global__ void plain(T* x) { x[0] = 2; }
}
template __global__ void ops::kern<128>(float*);
template __global__ void ops::other<float>(float*);
template __global__ void ops::plain<float>(float*);
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_table_and_the_report_name_sfinae_kernels_without_their_return_type(tmp_path: Path) -> None:
    (tmp_path / "sf.cu").write_text(SOURCE)
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["sf.cu"]\n'
                                         'flags = ["-std=c++17"]\n')
    run = kgate("check", "--format", "json", cwd=tmp_path)
    assert run.code == 0, run.stderr
    assert sorted(k["kernel"] for k in run.json()["kernels"]) == ["ops::kern<128>", "ops::other<float>",
                                                                  "ops::plain<float>"]
    table = kgate("check", "--show-kernels", cwd=tmp_path, env={"COLUMNS": "200"})
    assert "enable_if" not in table.stdout and "ops::kern<128>" in table.stdout, table.stdout


@pytest.mark.parametrize(("text", "name"), [
    ("void k<1>", "k<1>"),
    ("std::enable_if<((128)>(0)), void>::type ops::kern<128>", "ops::kern<128>"),
    ("std::enable_if<std::is_same<float, float>::value, void>::type ops::other<float>", "ops::other<float>"),
    ("(anonymous namespace)::kern", "(anonymous namespace)::kern"),
    ("void (anonymous namespace)::k<(1)<(2)>", "(anonymous namespace)::k<(1)<(2)>"),
    ("k", "k"),
    ("void ops::operator()", "ops::operator()"),
])
def test_the_return_type_is_what_comes_before_the_last_space_outside_brackets(text: str, name: str) -> None:
    assert strip_return_type(text) == name


def test_overloads_keep_their_parameters_and_lose_their_return_type() -> None:
    # void f<int>(int) and void f<int>(float) instantiated from two templates: the same short name.
    names = display_names(["_Z1fIiEvT_", "_Z1fIiEvf"])
    assert sorted(names.values()) == ["f<int>(float)", "f<int>(int)"]
