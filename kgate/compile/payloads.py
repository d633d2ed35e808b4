"""What each compile worker task takes (`kgate.compile.protocol.Task`) and answers, and the variant a Python
kernel's compile carries.

The planner builds a `Variant` for each launch of a registration or a capture (`kgate.compile.triton_plan.plan_variants`,
`captured_variant`; a CuTe DSL call: `kgate.compile.cute_plan.variants`); the compile worker reads it
(`kgate.compile.triton_backend.compile_variant`, `kgate.compile.cute_backend.compile_call`). They are TypedDicts,
plain dicts when the program runs: a variant is hashed into its compile key as JSON (`kgate.compile.cache.digest`),
so its keys and values are the key's, and typing them changes no key and no cached record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from kgate.collect.cuda_launches import LaunchSite
    from kgate.compile.compilation import Analyse


class Asked(TypedDict):
    """What a launch's registrations ask of it (`kgate.compile.expectations.requested`)."""

    expect: list[str]  # the expectations named (block-scaled MMA), sorted
    expect_implied: bool  # none named by some registration (or a capture): the compile decides


class _Variant(Asked):
    kernel: str  # "module:function"
    name: str  # the variant's readable name (its constexprs and options, or the captured specialisation's)
    source: str  # where it comes from: "registered" or "captured"
    pdl: bool
    kind: str
    shapes: list[dict[str, Any]]  # the audit's problem shapes


class Variant(_Variant, total=False):
    """One launch to compile: a registered Triton launch (`bind`), a captured one (`spec`) or a CuTe DSL call
    (`call`, with the environments that `captured` it)."""

    bind: dict[str, Any]  # the example arguments, constexprs and options Triton's launcher binds in the worker
    spec: dict[str, Any]  # a captured specialisation's record (`kgate.collect.specialization.Specialization`)
    call: dict[str, Any]  # a CuTe DSL call's record (`kgate.core.cute.CuteCall`)
    captured: list[str]


class ImportRequest(TypedDict):
    """What a worker needs to import a project's kernel module: its import path, the project's own folders (where
    its frames are) and the folder the module is imported in."""

    sys_path: list[str]
    roots: list[str]
    cwd: str
    checkout: list[str]  # on a base revision's side, the repository and its checkout (`kgate.compile.sides`); else []


class ExpandRequest(ImportRequest):
    """A `triton.expand` or `cute.expand` task: describe the kernel, to plan its variants."""

    kernel: str


class _CompileRequest(ImportRequest):
    variant: Variant
    target: str
    path: str  # the kernel's definition, as reports show it
    line: int
    artifacts: str  # the cache folder its artifacts go to
    key: str  # its compile key
    toolchain: dict[str, str]


class CompileRequest(_CompileRequest, total=False):
    """A `triton.compile` or `cute.compile` task: compile one variant for one target."""

    analyse: Analyse  # the facts stage's reading of the unit, in the worker (`kgate.compile.worker_facts`)


class CudaPlan(TypedDict):
    """A CUDA source file's compile for one target, as the run plans it (`kgate.compile.cuda_engine`): what the
    compiler is given, and what the configuration and the launch sites say of the file's kernels (applied by the
    facts stage, never compiled in)."""

    source: str  # the file as the project names it (a symlink stays one: nvcc names the kernels by it)
    rel: str
    aliases: list[list[str]]  # [folder, name] of the other names the project has for the file
    cwd: str
    root: str
    flags: list[str]
    virtual: str
    real: str
    target: str
    compiler: str  # "nvcc" or "nvrtc"
    nvcc: str | None
    artifacts: str
    timeout: float
    nvrtc_includes: list[str]
    toolchain: dict[str, str]
    pdl: list[str]
    expect: dict[str, list[str]]
    kind: dict[str, str]
    launch_sites: list[LaunchSite]


class _CudaRequest(CudaPlan):
    key: str


class CudaRequest(_CudaRequest, total=False):
    """A `cuda.compile` task: compile one file for one target under its compile key."""

    analyse: Analyse


class ProbeRequest(TypedDict):
    """A `cuda.probe` task: compile a file's probe of the shared memory sizes only the compiler settles
    (`kgate.compile.cuda_probe`), with the file's flags and target; each size asked is an `InstanceSize`'s fields."""

    source: str
    rel: str
    cwd: str
    flags: list[str]
    virtual: str
    nvcc: str | None
    timeout: float
    sizes: list[dict[str, Any]]


class SassRequest(TypedDict):
    """A `sass` task: disassemble a cached cubin whole (a Triton or CuTe DSL unit's one kernel)."""

    cubin: str


class FunctionsSassRequest(SassRequest):
    """A `cuda.sass` task: disassemble some functions of a cached cubin (a CUDA file's kernels the plan wants)."""

    symbols: list[str]


# What each task answers (`kgate.compile.protocol.Outcome.value` when the task succeeded).


class Param(TypedDict):
    """A kernel parameter as the planner reads it."""

    name: str
    constexpr: bool
    has_default: bool


class TunedConfig(TypedDict):
    """One autotune config of a kernel (`triton.Config`)."""

    kwargs: dict[str, Any]
    num_warps: int
    num_stages: int
    maxnreg: int | None


class Expansion(TypedDict):
    """A `triton.expand` or `cute.expand` task's answer, kept as the expansion record: where the kernel's jit
    function is defined, its parameters, the names its heuristics give and its autotune configs."""

    path: str
    line: int
    params: list[Param]
    heuristics: list[str]
    configs: list[TunedConfig]
    keys: list[str]  # the arguments the autotuner is keyed on (`triton.autotune(key=...)`)


class _CompileReply(TypedDict):
    context: dict[str, Any]  # what KernelFacts says of the variant besides what the compiler's output says
    artifacts: dict[str, str]  # artifact name -> content hash
    dynamic_smem: int
    cubin: str  # the hash of the cubin this compile wrote


class CompileReply(_CompileReply, total=False):
    """A `triton.compile` or `cute.compile` task's answer: what the compile record holds, and the cubin's hash."""

    entry_smem: dict[str, int]  # a CuTe DSL call's shared memory per kernel, as its launch asks
    bound: dict[str, Any]  # what binding the registration read (its heuristics): name -> value (`import_reads`)


class CudaReply(TypedDict, total=False):
    """A `cuda.compile` task's answer: the artifacts' hashes, the files the compile read and the cubin's hash; the
    compiler's verdict on the source (`error`, at `line`); or a compiler that cannot be used (`toolchain_error`)."""

    artifacts: dict[str, str]
    headers: list[str]
    cubin: str
    sass_symbols: list[str]  # the functions whose SASS the worker disassembled
    error: str
    line: int
    toolchain_error: str


# A task's answer: an expansion, a compile's record, or (`sass`, `cuda.sass`) the hash of the listing it kept.
Reply = Expansion | CompileReply | CudaReply | str


class ProbeReply(TypedDict):
    """A `cuda.probe` task's answer: the bytes of each size the compiler settled (by the index of the size asked)
    and the files the probe's compile read."""

    sizes: dict[int, int]
    headers: list[str]
