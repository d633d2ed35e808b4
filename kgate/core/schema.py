"""The configuration's schema: every key of `[tool.kgate]` (or kgate.toml), declared once.

Each key has a type, a default, its allowed values and a paragraph of documentation. The parser
(`kgate.core.config`) takes its known keys and the readers of its plain keys from here, the
configuration reference (docs/configuration.md) is generated from it, and so is the JSON Schema
that editors use (docs/kgate.schema.json): a key cannot be accepted without being documented.

Standard library only: the replay path may import the configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KNOWN_TARGETS = ("sm_120a", "sm_100a", "sm_90a")
# Each target's compute capability as Triton numbers it (major * 10 + minor): what its launcher binds for.
CAPABILITY = {"sm_120a": 120, "sm_100a": 100, "sm_90a": 90}
KINDS = ("elementwise", "reduction", "gemm", "other")
EXPECTATIONS = ("block_scale",)
SEVERITIES = ("error", "warning", "note", "off")
FAIL_ON = ("error", "warning", "note")
LANGUAGES = ("triton", "cute", "cuda")  # `--language` and `kgate.api.check(language=...)`
RATCHET_MODES = ("two-way", "tighten")
TOOLCHAIN_POLICIES = ("auto", "fail", "warn", "compare")
CUDA_COMPILERS = ("auto", "nvcc", "nvrtc")
# Bounds of numeric settings, so that a value past them is a configuration error rather than a failure deep in a
# system call or a compiler pass.
MAX_TIMEOUT = 86_400  # seconds: a compile that takes a day has hung (the OS waits at most about 24 days)
MAX_WARPS = 32  # a CTA holds at most 1024 threads
MAX_INT64 = 2**63 - 1  # TOML's integers are 64-bit; tomllib reads longer ones, which floats cannot hold
# The keys of an audit shape: a GEMM's dimensions, the grid size, and the work and traffic of any kernel.
SHAPE_KEYS = ("M", "N", "K", "ctas", "flops", "bytes")
# Directories never walked for sources.
DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "__pycache__", "build", "dist",
    "node_modules", "site-packages", ".kgate-cache", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs",
    "lost+found",  # a file system's, readable by root only: not the project's
)

REQUIRED = object()  # the default of a key that must be given


@dataclass(frozen=True)
class Setting:
    """One configuration key.

    `kind` is how the value is read: "string", "strings" (an array of strings), "choice" (one of
    `choices`), "choices" (an array of them), "targets" (a non-empty array of known targets),
    "integer" and "number" (within `minimum` / `maximum`), "boolean", "table" (a table whose keys are
    the user's and whose values are `values`), "tables" (an array of tables with the keys `fields`),
    or "special" (read by its own code in the parser; `json` describes it for editors).
    """

    key: str
    kind: str
    default: Any
    doc: str
    group: str = ""
    attr: str = ""  # the field it sets (Config, TritonEntry, CuteEntry or CudaEntry); default: the key with "_" for "-"
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    exclusive_minimum: bool = False  # for numbers: the minimum itself is refused
    maximum: float | None = None
    values: Setting | None = None  # "table": what each value is
    key_name: str = ""  # "table": what each key is ("pattern", "rule")
    fields: tuple[Setting, ...] = ()  # "tables": the keys of each table
    type_text: str = ""  # how the reference names the type, when the kind alone says too little
    json: dict[str, Any] | None = None  # the JSON Schema of a "special" value
    example: str = ""  # a TOML snippet for the reference

    @property
    def field(self) -> str:
        return self.attr or self.key.replace("-", "_")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


def keys(settings: tuple[Setting, ...]) -> set[str]:
    return {s.key for s in settings}


def by_key(settings: tuple[Setting, ...], key: str) -> Setting:
    return next(s for s in settings if s.key == key)


# --------------------------------------------------------------------------- values shared by several keys

_CONSTEXPR_JSON: dict[str, Any] = {
    "description": "a number, boolean or string, a dtype as \"tl.bfloat16\", None as \"None\", or an array of these",
    "anyOf": [{"type": ["number", "boolean", "string"]},
              {"type": "array", "items": {"$ref": "#/$defs/constexpr"}}],
}
_ARG_JSON: dict[str, Any] = {
    "anyOf": [
        {"type": ["number", "boolean"]},
        {"type": "string", "pattern": "^(None|\\*.+)$"},
        {"type": "object", "required": ["type"], "additionalProperties": False,
         "properties": {"type": {"type": "string", "pattern": "^\\*.+"},
                        "align": {"type": "integer", "minimum": 1}}},
    ],
}
_ARGS_TABLE: dict[str, Any] = {"type": "object", "additionalProperties": {"$ref": "#/$defs/arg"}}
_SHAPE_JSON: dict[str, Any] = {
    "type": "object", "minProperties": 1, "additionalProperties": False,
    "properties": {key: {"type": "integer", "minimum": 1, "maximum": MAX_INT64} for key in SHAPE_KEYS},
}
_VARIANT_JSON: dict[str, Any] = {
    "type": "object",
    "properties": {"num_warps": {"type": "integer", "minimum": 1, "maximum": MAX_WARPS},
                   "num_stages": {"type": "integer", "minimum": 1}},
    "additionalProperties": {"$ref": "#/$defs/constexpr"},
}
DEFS: dict[str, Any] = {"constexpr": _CONSTEXPR_JSON, "arg": _ARG_JSON}


# --------------------------------------------------------------------------- [[triton]]

TRITON: tuple[Setting, ...] = (
    Setting("kernel", "string", REQUIRED, type_text='string ("package.module:function")', doc=(
        "The kernel, as `package.module:function`: a `@triton.jit` or `@gluon.jit` function, autotuned or not, "
        "found under a `python-path` entry. kgate reads its parameters from the source when it is provably a plain "
        "`@triton.jit` function, and otherwise imports the module in a compile worker to see what the name "
        "holds.")),
    Setting("signature", "table", {}, key_name="argument", values=Setting("", "string", "", ""),
            type_text="table of Triton type strings", doc=(
        "The run-time arguments and their Triton types (`\"*fp16\"` for a pointer, `\"i32\"`, ...). Required "
        "unless `args` gives example values of every run-time argument."),
        example='signature = { x = "*fp16", y = "*fp16", n = "i32" }'),
    Setting("constexprs", "special", {}, type_text="table", json={
        "type": "object", "additionalProperties": {"$ref": "#/$defs/constexpr"}}, doc=(
        "The `tl.constexpr` values: numbers, booleans, strings, dtypes (`\"tl.bfloat16\"`), `\"None\"`, or "
        "arrays of these (a tuple constexpr). A constexpr that a `triton.heuristics` sets needs no value here: "
        "heuristics are computed from the registration's arguments and constexprs, as in a real launch."),
        example="constexprs = { BLOCK = 1024 }"),
    Setting("num_warps", "integer", 4, minimum=1, maximum=MAX_WARPS, doc=(
        "Warps per CTA; at most 32, since a CTA holds at most 1024 threads.")),
    Setting("num_stages", "integer", 3, minimum=1, doc="Software pipelining stages of the kernel's loops."),
    Setting("expect", "choices", None, choices=EXPECTATIONS, doc=(
        "What the compiled kernel must contain: `block_scale` (block-scaled MMA, judged by `block-scale-missing`). "
        "Left out, it is implied by what each specialisation compiles: one whose code calls `tl.dot_scaled` (in the "
        "kernel or a function it calls, in a branch its constexprs keep) expects block-scaled MMA.")),
    Setting("pdl", "boolean", False, doc=(
        "The kernel is launched with programmatic dependent launch (`launch_pdl`): it is compiled so, and "
        "`pdl-missing-wait` checks that it writes no global memory before it waits, and asks about every "
        "argument it loads before then.")),
    Setting("kind", "choice", "other", choices=KINDS, doc=(
        "What the kernel does, for the rules that judge by it: the occupancy rule judges elementwise and "
        "reduction kernels, and the audit estimates a GEMM's accumulator and grid.")),
    Setting("variants", "special", [], type_text="array of tables", json={"type": "array", "items": _VARIANT_JSON},
            doc=(
        "More variants of the same registration: each table overrides constexprs and `num_warps` / "
        "`num_stages`, and becomes a kernel variant of its own."),
        example="variants = [ { BLOCK = 512, num_warps = 8 } ]"),
    Setting("shapes", "special", [], type_text="array of tables", json={"type": "array", "items": _SHAPE_JSON},
            doc=(
        "Problem shapes for the audit report's wave and intensity budgets: `M`, `N`, `K` for a GEMM, or "
        "`ctas` (the grid size), `flops` and `bytes` for any kernel. A shape takes only these six keys, at least "
        "one of them, each a positive 64-bit integer."),
        example="shapes = [{ M = 8192, N = 4096, K = 4096 }]"),
    Setting("divisible", "strings", None, type_text="array of argument names", doc=(
        "Without `args`: the arguments launched divisible by 16, which Triton's launcher specialises on. "
        "Left out, every pointer and integer argument is (the most common case in measured real launches); "
        "list them to say otherwise.")),
    Setting("args", "special", [], type_text="table, or array of tables", json={
        "anyOf": [_ARGS_TABLE, {"type": "array", "minItems": 1, "items": _ARGS_TABLE}]}, doc=(
        "Example values of the run-time arguments, one table per launch to gate: integers, floats, booleans, "
        "`\"None\"`, and for a pointer its type (`\"*bf16\"`) or `{ type = \"*bf16\", align = 8 }` (the "
        "address's alignment in bytes, a power of two; default 16, as torch allocates). Triton's own launcher "
        "derives the specialisation from them in kgate's compile worker. With `args`, `signature` may be left "
        "out."),
        example='args = { x = "*bf16", n = 4097, stride = 1, bias = "None" }'),
    Setting("targets", "targets", None, doc=(
        "The targets the kernel is built for (default: every target of the run). On the others it is neither "
        "imported nor compiled, so a kernel written for one architecture does not fail the gate on another.")),
)

# --------------------------------------------------------------------------- [[cuda]]

CUDA: tuple[Setting, ...] = (
    Setting("sources", "strings", REQUIRED, type_text="array of glob patterns", doc=(
        "The `.cu` files to compile and gate: glob patterns relative to the project folder. A pattern that "
        "matches no file, and one that leads out of the project (`..`, an absolute path), is an error; a file "
        "in a symlinked folder is the project's, named through the link.")),
    Setting("flags", "strings", [], doc=(
        "nvcc flags for these files (paths relative to the project folder), after those of "
        "`compile_commands`. kgate drops what it decides itself (outputs, dependency files, `-c`, the "
        "architectures) and adds one `-gencode` per target.")),
    Setting("compile_commands", "string", None, doc=(
        "A `compile_commands.json` whose command for each file gives its real flags, as the build runs it "
        "(in its folder, `--options-file` response files included; a file listed twice takes its first "
        "command). It may lie outside the project (an out-of-tree build); kgate then says so on every run.")),
    Setting("pdl", "strings", [], type_text="array of kernel-name patterns", doc=(
        "Kernels known to be launched with programmatic dependent launch, beside those kgate finds at "
        "`cudaLaunchKernelEx` launch sites.")),
    Setting("expect", "table", {}, key_name="kernel-name pattern",
            values=Setting("", "choices", [], "", choices=EXPECTATIONS), doc=(
        "What the matching kernels must contain: `block_scale` (block-scaled MMA)."),
        example='expect = { "mxf8_gemm*" = ["block_scale"] }'),
    Setting("launch_wrappers", "strings", [], type_text="array of function names", doc=(
        "Functions that launch the kernel passed to them with PDL (`pdl::launch`): a kernel passed to one is "
        "PDL-launched.")),
    Setting("kind", "table", {}, key_name="kernel-name pattern", values=Setting("", "choice", "", "", choices=KINDS),
            doc="The kind of the matching kernels (default `other`), as a Triton registration's `kind`.",
            example='kind = { "rmsnorm*" = "reduction" }'),
    Setting("compiler", "choice", "auto", choices=CUDA_COMPILERS, doc=(
        "`auto`: nvcc when it is found, else NVRTC; `nvcc`; or `nvrtc`, which compiles device-only sources "
        "without a CUDA toolkit (a file with host code then gets a `compile-error` that says it needs nvcc).")),
    Setting("targets", "targets", None, doc=(
        "The targets these files are built for (default: every target of the run); on the others they are not "
        "compiled.")),
    Setting("torch", "special", "auto", type_text="`\"auto\"` or boolean",
            json={"anyOf": [{"type": "boolean"}, {"enum": ["auto"]}]}, doc=(
        "Compile the files as PyTorch extensions, with the include folders, defines and options torch's "
        "`CUDAExtension` build adds, taken from the torch installed where kgate runs (found without importing "
        "it). `auto`: the files that include a torch, ATen, c10 or pybind11 header, themselves or through a "
        "project header, that their own include folders do not hold; `true`: every file whose flags do not give "
        "torch's include folder; `false`: none. The torch version is part of the cache key.")),
)

# --------------------------------------------------------------------------- [[cute]]

_CUTE_DIM: dict[str, Any] = {"anyOf": [{"type": "integer", "minimum": 0},
                                       {"type": "string", "pattern": "^\\?([A-Za-z_][A-Za-z0-9_]*)?(:[1-9][0-9]*)?$"}]}
_CUTE_TENSOR: dict[str, Any] = {
    "type": "object", "required": ["dtype", "shape"], "additionalProperties": False,
    "properties": {"dtype": {"type": "string", "pattern": "^cutlass\\.[A-Za-z_][A-Za-z0-9_]*$"},
                   "shape": {"type": "array", "minItems": 1, "items": _CUTE_DIM},
                   "stride": {"type": "array", "minItems": 1, "items": _CUTE_DIM},
                   "align": {"type": "integer", "minimum": 1}},
}
_CUTE_SCALAR: dict[str, Any] = {
    "type": "object", "required": ["dtype", "value"], "additionalProperties": False,
    "properties": {"dtype": {"type": "string", "pattern": "^cutlass\\.[A-Za-z_][A-Za-z0-9_]*$"},
                   "value": {"type": ["number", "boolean"]}},
}
_CUTE_VALUE: dict[str, Any] = {"anyOf": [{"type": ["number", "boolean", "string"]}, _CUTE_SCALAR, _CUTE_TENSOR,
                                         {"type": "array", "items": {"type": ["number", "boolean", "string"]}}]}
_CUTE_ARGS: dict[str, Any] = {"type": "object", "additionalProperties": _CUTE_VALUE}

CUTE: tuple[Setting, ...] = (
    Setting("kernel", "string", REQUIRED, type_text='string ("package.module:name")', doc=(
        "The kernel, as `package.module:name`: a `@cute.jit` function, or a class whose `__call__` is one (built "
        "with `init` for each call), found under a `python-path` entry. kgate imports its module in a compile "
        "worker and compiles it with `cute.compile`, as the project's own code does.")),
    Setting("args", "special", REQUIRED, type_text="table, or array of tables", json={
        "anyOf": [_CUTE_ARGS, {"type": "array", "minItems": 1, "items": _CUTE_ARGS}]}, doc=(
        "The arguments of the jit function, one table per `cute.compile` call to gate: a tensor as "
        "`{ dtype = \"cutlass.BFloat16\", shape = [\"?\", 4096], stride = [4096, 1], align = 16 }` (a dimension "
        "is an integer, or a symbol: `\"?\"`, `\"?:8\"` divisible by 8, `\"?m\"` one named symbol wherever "
        "it is written; `stride` defaults to row-major, `align` is the assumed alignment in bytes), a dtype as "
        "`\"cutlass.Float32\"`, a scalar of the DSL's as `{ dtype = \"cutlass.Float32\", value = 0.0 }` "
        "(`cutlass.Float32(0.0)`), a stream as `\"stream\"`, `\"None\"`, numbers, booleans and strings. kgate "
        "makes fake tensors of them (`make_fake_tensor`): no GPU and no memory is needed."),
        example='args = { x = { dtype = "cutlass.BFloat16", shape = ["?", 4096], stride = [4096, 1], align = 16 }, '
                'stream = "stream" }'),
    Setting("init", "special", {}, type_text="table", json={"type": "object", "additionalProperties": _CUTE_VALUE},
            doc=(
        "For a class kernel: its constructor's keyword arguments (dtypes, numbers, booleans, strings)."),
        example='init = { dtype = "cutlass.BFloat16", N = 4096 }'),
    Setting("options", "string", "", doc=(
        "`cute.compile` options of the project's own call (`\"--enable-tvm-ffi\"`), beside those kgate adds: "
        "the target, and the PTX, cubin and ptxas report it keeps.")),
    Setting("expect", "choices", None, choices=EXPECTATIONS, doc=(
        "What the compiled kernels must contain: `block_scale` (block-scaled MMA, judged by "
        "`block-scale-missing`). Nothing is implied for a CuTe DSL kernel.")),
    Setting("kind", "choice", "other", choices=KINDS, doc="What the kernels do, as a Triton registration's `kind`."),
    Setting("shapes", "special", [], type_text="array of tables", json={"type": "array", "items": _SHAPE_JSON},
            doc="Problem shapes for the audit report, as a Triton registration's `shapes`."),
    Setting("targets", "targets", None, doc=(
        "The targets the kernel is built for (default: every target of the run); on the others it is neither "
        "imported nor compiled.")),
)

# --------------------------------------------------------------------------- [tool.kgate]

SETTINGS: tuple[Setting, ...] = (
    # What to gate
    Setting("targets", "targets", ("sm_120a",), group="What to gate", doc=(
        "The targets every kernel is compiled for: `sm_120a` (RTX 5090, RTX 5060 Ti), `sm_100a` (B200), "
        "`sm_90a` (H100, H200). At least one; `--target` narrows a run to some of them.")),
    Setting("triton", "tables", (), group="What to gate", fields=TRITON, doc=(
        "Triton kernels to gate, one `[[tool.kgate.triton]]` table per registration (a kernel may be registered "
        "several times). `@kgate.register(...)` on the kernel takes the same keys but `kernel`; kgate reads the "
        "decorator from the source, so its arguments must be literals. An autotuned kernel expands into one "
        "variant per config.")),
    Setting("cute", "tables", (), group="What to gate", fields=CUTE, doc=(
        "CuTe DSL kernels to gate, one `[[tool.kgate.cute]]` table per kernel: a `@cute.jit` function (or a class "
        "whose `__call__` is one) and the arguments of the `cute.compile` calls to gate. `@kgate.register(...)` "
        "on a `@cute.jit` function takes the same keys but `kernel`. See docs/cute.md.")),
    Setting("cuda", "tables", (), group="What to gate", fields=CUDA, doc=(
        "CUDA C++ sources to compile and gate, one `[[tool.kgate.cuda]]` table per set of files. Patterns of "
        "kernel names (`pdl`, `expect`, `kind`) match a kernel's name as shown, without its namespaces or "
        "without its template arguments. A file named by two tables must be configured alike in both.")),
    Setting("capture", "string", "kgate-capture.toml", group="What to gate", doc=(
        "The file `kgate capture` writes the recorded specialisations to and `kgate check` gates. It must be "
        "in the project, and be neither the configuration nor the baseline.")),
    Setting("device-independent-launchers", "boolean", False, group="What to gate", doc=(
        "Whether the project's launchers bind the same specialisations on every GPU (no tile, config or option "
        "chosen from the device's capability). By default a captured entry is gated on the targets its capture "
        "applies to: a GPU capture on its device's target (an H100 or H200 capture on `sm_90a`), an offline "
        "capture on the target it bound for; an entry a capture made on another device is not compiled for a "
        "target whose GPU launches something else. `true` gates every captured entry on every target.")),
    Setting("setup", "string", None, group="What to gate", type_text='string ("package.module:function" or a file)',
            doc=(
        "A hook run before the project's kernel modules are imported (in the captured command's processes and "
        "in every compile worker), for projects that probe the device at import: a Python file (relative to the "
        "project folder), run, or `package.module:function`, called.")),
    Setting("python-path", "strings", (".", "src"), group="What to gate", doc=(
        "Folders (relative to the project folder) where kernel modules are found, in this order, put on "
        "`sys.path` of the compile workers. A folder outside the project is allowed, with a notice on every run: "
        "modules there are imported. `kgate lint` follows the project's absolute imports through the same folders "
        "inside the project (then the project folder and its `src`), importing nothing: a kernel module that takes "
        "Triton or a launcher from a package in another of them is read as it runs.")),
    Setting("exclude", "strings", DEFAULT_EXCLUDE, group="What to gate", doc=(
        "Paths kgate never walks, for source rules, registrations or CUDA sources. A bare name (`build`) "
        "matches at any depth; a pattern with a `/` or a wildcard matches the path or a parent of it (`./build` is "
        "`build` at the top only); a `**/` stands for any number of folders, none included (`**/gen` is also the "
        "top-level `gen`), in every path pattern of the configuration. Setting it "
        "replaces the defaults; `extend-exclude` adds to them. Files named on the `kgate lint` command line are "
        "linted even when excluded, unless `--force-exclude` is given (the pre-commit hook gives it).")),
    Setting("extend-exclude", "strings", (), group="What to gate", doc="Paths excluded besides `exclude`."),
    Setting("respect-gitignore", "boolean", True, group="What to gate", doc=(
        "Whether `kgate lint` (and the source rules of `kgate check`) skip what the ignore files ignore: "
        "`.ignore` files, and inside a git repository `.gitignore` files (nested ones too, with negation), "
        "`.git/info/exclude` and the global excludes file. Files named on the command line are linted even "
        "when ignored. Read from the configuration of the folder kgate is started in; "
        "`--no-respect-gitignore` turns it off for one run.")),
    # Rules
    Setting("select", "strings", (), group="Rules", type_text="array of codes, prefixes, names or ALL", doc=(
        "The rules that run: codes (`KG201`), prefixes (`KG2`), rule names, or `ALL`. Empty (the default): every "
        "rule except the opt-in ones (`kernel-file-size`, KG303), which run only when named here, in "
        "`extend-select` or on the command line (by code, name, prefix or `ALL`). `--select` on the command line "
        "replaces it.")),
    Setting("extend-select", "strings", (), group="Rules", doc="Rules added to `select` (codes, prefixes or names)."),
    Setting("ignore", "strings", (), group="Rules", doc=(
        "Rules turned off (codes, prefixes or names). `compile-error` (KG001) and `stale-capture` (KG005) "
        "cannot be: a kernel that was not compiled is not gated at all.")),
    Setting("per-file-ignores", "table", {}, group="Rules", key_name="path pattern",
            values=Setting("", "strings", (), ""), doc=(
        "Rules turned off for the files a pattern matches (a `**/` matches no folder too: `**/gen/*.cu` covers "
        "`gen/k.cu`)."),
        example='[tool.kgate.per-file-ignores]\n"benchmarks/*" = ["runtime-autotune"]'),
    Setting("severity", "table", {}, group="Rules", key_name="rule", values=Setting("", "choice", "", "",
                                                                                    choices=SEVERITIES), doc=(
        "A rule's severity, by code or name: `error`, `warning`, `note`, or `off`. KG001 and KG005 stay "
        "errors: naming them here below `error` is a configuration error."),
        example='[tool.kgate.severity]\nKG202 = "warning"'),
    Setting("options", "special", {}, group="Rules", type_text="table of tables, by rule name", json=None, doc=(
        "Each rule's options, in a table named after the rule (`[tool.kgate.options.launch-guard]`). The "
        "[rule pages](rules.md) list every option and its default; `kgate explain CODE` prints them. A "
        "threshold exists only here: the ratchet and the audit read it from the rule, so one value moves them "
        "all."), example='[tool.kgate.options.launch-guard]\nwindow = 5'),
    Setting("strict-configs", "boolean", False, group="Rules", doc=(
        "Whether every config of an autotuned launch is gated as if it ships. By default a compiled rule's "
        "finding in some but not all configs of one launch is a warning that names the config (a GPU autotuner "
        "keeps the fastest config and may never pick it; prune it from the configs), and stays an error where "
        "every config of the launch has it or where a GPU capture marked the config `picked`. `true` keeps every "
        "such finding at the rule's severity.")),
    Setting("fail-on", "choice", "error", group="Rules", choices=FAIL_ON, doc=(
        "The lowest severity that fails the run, and that the baseline pins.")),
    # The ratchet
    Setting("baseline", "string", "kgate-baseline.toml", group="The ratchet", doc=(
        "The committed baseline that `kgate check` compares with and `kgate baseline update` rewrites. It must "
        "be in the project (symlinks followed), and be neither the configuration nor the capture file.")),
    Setting("ratchet", "choice", "two-way", group="The ratchet", choices=RATCHET_MODES, doc=(
        "`two-way`: a pinned number that improved (IMPROVED) or a pinned finding that went (GONE) fails as a "
        "stale pin, so every change of a number is reviewed; `tighten`: they are accepted.")),
    Setting("toolchain-change", "choice", "auto", group="The ratchet", choices=TOOLCHAIN_POLICIES, doc=(
        "What a run does when the baseline has no pins for its compilers: `fail` until they are pinned; `warn`: "
        "report every difference the compiler decides without failing; `compare` with the pins of the closest "
        "toolchain as usual; `auto`: `fail` where the `CI` environment variable is set, `warn` elsewhere.")),
    Setting("size-slack", "integer", 10, group="The ratchet", minimum=0, doc=(
        "Size-like findings (a file's code lines) are pinned rounded up to a multiple of this, so two branches "
        "that each grow a file a little do not both rewrite the pin.")),
    # Compiling
    Setting("cache-dir", "string", ".kgate-cache", group="Compiling", doc=(
        "The facts cache, lint cache and run records (relative to the project folder). It may be outside the "
        "project (said in a notice on every run), but not the project folder or a parent of it, nor a folder of "
        "files kgate did not write: kgate marks it ignored with a `.gitignore` of `*` and a `CACHEDIR.TAG`.")),
    Setting("jobs", "integer", None, group="Compiling", minimum=1, type_text="integer (default: every core)", doc=(
        "How many compile workers run at once, and the most worker processes `kgate lint` uses on a cold run. "
        "Left out, every core the process may use (for `kgate lint`, those no other process is running on as it "
        "starts). `-j N` on the command line wins.")),
    Setting("timeout", "number", 600.0, group="Compiling", minimum=0, exclusive_minimum=True, maximum=MAX_TIMEOUT,
            type_text="number of seconds", doc=(
        "How long one compile, or one import of a kernel module, may take before it is stopped (its whole process "
        "group) and reported as `compile-error` (KG001) on that kernel or file, with the project's line the worker was "
        "at; the other kernels are still compiled and judged. At most 86400 (a day).")),
    Setting("nvcc", "string", None, group="Compiling", type_text="string (a path or a program name)", doc=(
        "The nvcc to compile CUDA sources with. Without it kgate looks in `$CUDA_HOME/bin` (`$CUDA_PATH`), on "
        "`PATH`, then in a pip wheel (`nvidia-cuda-nvcc`); `kgate doctor` shows which one it found.")),
)

GROUPS = ("What to gate", "Rules", "The ratchet", "Compiling")


# --------------------------------------------------------------------------- JSON Schema

def json_schema(rule_options: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of kgate.toml, for editors. `rule_options` maps each rule name to the
    JSON Schema of each of its options; without it `options` takes any table of tables."""
    options: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "object"}}
    if rule_options is not None:
        options = {"type": "object", "additionalProperties": False, "properties": {
            name: {"type": "object", "additionalProperties": False, "properties": props}
            for name, props in sorted(rule_options.items())}}
    top = _object(SETTINGS, {"options": options})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "kgate configuration",
        "description": "kgate.toml, or the [tool.kgate] table of pyproject.toml. Generated by docs/generate.py.",
        **top,
        "$defs": DEFS,
    }


def _object(settings: tuple[Setting, ...], overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    properties = {}
    for setting in settings:
        value = dict((overrides or {}).get(setting.key) or value_schema(setting))
        value["description"] = setting.doc
        if not setting.required and setting.default is not None:
            value["default"] = _jsonable(setting.default)
        properties[setting.key] = value
    out: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": properties}
    required = [s.key for s in settings if s.required]
    if required:
        out["required"] = required
    return out


def value_schema(setting: Setting) -> dict[str, Any]:
    """The JSON Schema of one setting's value."""
    kind = setting.kind
    if kind == "string":
        return {"type": "string"}
    if kind == "boolean":
        return {"type": "boolean"}
    if kind in ("integer", "number"):
        out: dict[str, Any] = {"type": kind}
        if setting.minimum is not None:
            out["exclusiveMinimum" if setting.exclusive_minimum else "minimum"] = setting.minimum
        if setting.maximum is not None:
            out["maximum"] = setting.maximum
        return out
    if kind == "strings":
        return {"type": "array", "items": {"type": "string"}}
    if kind == "choice":
        return {"enum": list(setting.choices)}
    if kind == "choices":
        return {"type": "array", "items": {"enum": list(setting.choices)}}
    if kind == "targets":
        return {"type": "array", "minItems": 1, "items": {"enum": list(KNOWN_TARGETS)}}
    if kind == "table":
        assert setting.values is not None
        return {"type": "object", "additionalProperties": value_schema(setting.values)}
    if kind == "tables":
        return {"type": "array", "items": _object(setting.fields)}
    if kind == "special":
        return dict(setting.json or {})
    raise ValueError(f"unknown kind {kind!r} of {setting.key}")


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def type_text(setting: Setting) -> str:
    """How the configuration reference names a setting's type."""
    if setting.type_text:
        return setting.type_text
    simple = {"string": "string", "boolean": "boolean", "strings": "array of strings", "integer": "integer",
              "number": "number", "targets": "array of targets", "tables": "array of tables", "table": "table"}
    if setting.kind == "choice":
        return "string"
    if setting.kind == "choices":
        return "array of strings"
    if setting.kind == "table" and setting.values is not None:
        return f"table: {setting.key_name} -> {type_text(setting.values)}"
    return simple[setting.kind]
