"""The pieces of the CUDA side that need no compiler: flags, names, launch sites, the toolchain choice."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgate.collect.cuda_flags import ArchPair, choose_arch, parse_archs, split_flags
from kgate.collect.cuda_launches import pdl_launch_sites, pdl_launched
from kgate.collect.cuda_names import definition_line, display_names, global_definitions, matches, short_name
from kgate.core.errors import ToolchainError
from kgate.support.toolchain import CudaToolchain, Tool


def test_a_cmake_command_keeps_the_real_flags_and_drops_outputs(tmp_path: Path) -> None:
    (tmp_path / "includes.rsp").write_text("-I/src/include -isystem /opt/lib\n")
    argv = ["-forward-unknown-to-host-compiler", "-DBLOCK=256", "--options-file", "includes.rsp",
            "--generate-code=arch=compute_120,code=[compute_120,sm_120]", "--expt-relaxed-constexpr",
            "-x", "cu", "-c", str(tmp_path / "a.cu"), "-o", "a.cu.o", "-MD", "-MT", "a.cu.o", "-MF", "a.d"]
    split = split_flags(argv, source=str(tmp_path / "a.cu"), cwd=tmp_path)
    assert split.flags == ("-forward-unknown-to-host-compiler", "-DBLOCK=256", "-I/src/include", "-isystem",
                           "/opt/lib", "--expt-relaxed-constexpr")
    assert split.archs == (ArchPair("compute_120", None), ArchPair("compute_120", "sm_120"))


def test_the_value_of_an_option_passed_on_to_a_tool_is_the_tools() -> None:
    # `-v` and `-c` are nvcc's own modes, dropped; after `-Xptxas` or `-Xcompiler` they are the tool's.
    split = split_flags(["-Xptxas", "-v", "--compiler-options", "-c", "-v", "-O3", "-Xcompiler", "-fPIC"])
    assert split.flags == ("-Xptxas", "-v", "--compiler-options", "-c", "-O3", "-Xcompiler", "-fPIC")


def test_a_non_nvcc_command_keeps_only_portable_flags() -> None:
    split = split_flags(["-I", "inc", "-DX=1", "-Wall", "-std=c++17", "-fPIC"], nvcc=False)
    assert split.flags == ("-I", "inc", "-DX=1", "-std=c++17")


@pytest.mark.parametrize(("values", "expected"), [
    ([("-arch", "sm_90a")], [ArchPair("compute_90a", "sm_90a")]),
    ([("-arch", "compute_120a"), ("-code", "sm_120a")], [ArchPair("compute_120a", "sm_120a")]),
    ([("-gencode", "arch=compute_120f,code=sm_120f")], [ArchPair("compute_120f", "sm_120f")]),
    ([("-arch", "native")], []),
])
def test_architectures_are_read_in_every_spelling(values: list[tuple[str, str]], expected: list[ArchPair]) -> None:
    assert parse_archs(values) == expected


def test_the_projects_own_arch_of_the_family_is_compiled_and_a_wins() -> None:
    archs = (ArchPair("compute_120", "sm_120"), ArchPair("compute_120a", "sm_120a"), ArchPair("compute_90", "sm_90"))
    assert choose_arch(archs, "sm_120a") == ArchPair("compute_120a", "sm_120a")
    assert choose_arch(archs[:1], "sm_120a") == ArchPair("compute_120", "sm_120")
    assert choose_arch(archs, "sm_90a") == ArchPair("compute_90", "sm_90")
    assert choose_arch(archs, "sm_100a") == ArchPair("compute_100a", "sm_100a")


def test_names_drop_return_type_parameters_and_nvcc_anonymous_namespaces() -> None:
    assert short_name("_Z5scaleI6__halfLi2EEvPKT_PS1_") == "scale<__half, 2>"
    assert short_name("use_anon") == "use_anon"
    anonymous = "_ZN39_GLOBAL__N__9008ca95_7_host_cu_a15cfaff4anonEPf"
    assert display_names([anonymous]) == {anonymous: "anon"}


def test_the_anonymous_namespace_stays_where_it_tells_two_kernels_apart() -> None:
    anonymous = "_ZN39_GLOBAL__N__9008ca95_7_host_cu_a15cfaff4anonEPf"
    names = display_names([anonymous, "_Z4anonPf"])
    assert names == {anonymous: "(anonymous namespace)::anon", "_Z4anonPf": "anon"}


def test_globs_match_with_or_without_namespaces_and_template_arguments() -> None:
    name = "ops::rmsnorm_kernel<__half, 128>"
    assert all(matches(name, [glob]) for glob in ("rmsnorm*", "ops::*", "rmsnorm_kernel", "*<__half*"))
    assert not matches(name, ["layernorm*"])


def test_global_lines_skip_launch_bounds_and_pick_the_definition() -> None:
    text = ("template <int B>\n__global__ void __launch_bounds__(B) k(float* x);\n\n"
            "template <int B>\n__global__ void\n__launch_bounds__(B)\nk(float* x) {\n  x[0] = B;\n}\n")
    definitions = global_definitions(text)
    assert definitions == {"k": [2, 5]}
    assert definition_line(definitions, "k", 7) == 5


def test_launch_sites_need_the_pdl_attribute_switched_on() -> None:
    text = """
void on(float* x) {
  cudaLaunchAttribute a[1];
  a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchKernelEx(&cfg, k_on, x);
}
void off(float* x) {
  cudaLaunchAttribute a[1];
  a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a[0].val.programmaticStreamSerializationAllowed = 0;
  cudaLaunchKernelEx(&cfg, k_off, x);
}
void plain(float* x) {
  cudaLaunchKernelEx(&cfg, k_plain, x);
  // launch::pdl(k_comment, x);
}
"""
    sites = pdl_launch_sites(text, "a.cu", {"k_on", "k_off", "k_plain", "k_comment"}, ("launch::pdl",))
    assert [(s.kernel, s.line) for s in sites] == [("k_on", 6)]


def test_a_pdl_launch_under_if_0_is_no_launch() -> None:
    text = ("#if 0\nvoid f() { cudaLaunchAttribute a; a.id = cudaLaunchAttributeProgrammaticStreamSerialization;\n"
            "  cudaLaunchKernelEx(&cfg, k, x); launch::pdl(k, x); }\n#endif\n")
    assert pdl_launch_sites(text, "a.cu", {"k"}, ("launch::pdl",)) == []
    assert len(pdl_launch_sites(text.replace("#if 0", "#if 1"), "a.cu", {"k"}, ("launch::pdl",))) == 2


def test_template_arguments_at_the_launch_site_select_the_instantiation() -> None:
    text = ("void f() { cudaLaunchAttribute a; a.id = cudaLaunchAttributeProgrammaticStreamSerialization;\n"
            "  cudaLaunchKernelEx(&cfg, k<float, 4>, x); }\n")
    sites = pdl_launch_sites(text, "a.cu", {"k"}, ())
    known = {"k": {"<float,4>", "<__half,8>"}}
    assert pdl_launched("k<float, 4>", sites, known) is not None
    assert pdl_launched("k<__half, 8>", sites, known) is None
    generic = pdl_launch_sites(text.replace("k<float, 4>", "k<T, 4>"), "a.cu", {"k"}, ())
    assert pdl_launched("k<__half, 8>", generic, known) is not None  # a launcher's own parameter: all of them


def test_no_compiler_at_all_is_one_clear_error() -> None:
    missing = CudaToolchain(Tool("nvcc", None, None, ""), Tool("nvrtc", None, None, ""))
    with pytest.raises(ToolchainError, match="no CUDA compiler found for the configured CUDA sources"):
        missing.compiler()
    only_nvrtc = CudaToolchain(Tool("nvcc", None, None, ""), Tool("nvrtc", "lib", "13.5", "cuda-python"))
    assert only_nvrtc.compiler() == "nvrtc"
    with pytest.raises(ToolchainError, match="compiler = 'nvcc'"):
        only_nvrtc.compiler("nvcc")


def test_calls_of_a_name_are_what_the_word_boundary_pattern_finds() -> None:
    """`calls_of` searches for the name's letters and checks the word boundary itself (a pattern that starts with
    `\\b` is tried at every position): the same matches as the plain pattern, in any region of the text."""
    import random
    import re

    from kgate.collect.cpp_text import calls_of

    pieces = ["run", "run_", "xrun", "run2", "é", "rún", " ", "\n", "(", ")", "<", ">", "<int>", ";", "{", "}",
              "::", "run<T>(", "run (", "a", "_"]
    rng = random.Random(11)
    for name in ("run", "run_", "r"):
        pattern = re.compile(r"\b" + re.escape(name) + r"\s*(?:<[^;{}]*?>)?\s*\(")
        for _ in range(400):
            code = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 40)))
            start = rng.randrange(0, len(code) + 1)
            end = rng.randrange(start, len(code) + 1)
            expected = [(m.start(), m.end()) for m in pattern.finditer(code, start, end)
                        if m.start() == 0 or not re.match(r"\w", code[m.start() - 1])]
            assert [(m.start(), m.end()) for m in calls_of(code, name, start, end)] == expected, (code, start, end)
