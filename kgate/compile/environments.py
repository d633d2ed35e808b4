"""Other releases of a compiler distribution, for `kgate check --triton VERSION` and `--cute-dsl VERSION`: what
upgrading (or not) Triton or the CuTe DSL does to the kernels.

A distribution is what pip installs (`triton`, `nvidia-cutlass-dsl`) and the kernels it compiles (`Distribution`).
Each release gets a virtual environment of its own, made once with this Python from the package index
(`pip install NAME==VERSION` with its own dependencies, and nothing else but tomli where Python needs it), kept in
the user's cache (`$KGATE_TOOLCHAINS`, else `$XDG_CACHE_HOME/kgate/toolchains`, else `~/.cache/kgate/toolchains`):
never in the project or its `.kgate-cache`, which CI carries between jobs. It is made in a temporary folder and
moved into place whole, under a lock, so a killed or concurrent run never leaves or uses a half-made one; before
each use its record is checked against the files of the release it holds. A run needs no network once the
environment exists.

The kernels are compiled there by kgate itself: `kgate check --language LANGUAGE --format json` under the
environment's Python, with this kgate's own package put first on its path and this environment's packages (torch,
the project's own) after the release's, so the figures come from that release exactly as they would from a project
that had it installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgate.core.errors import ToolchainError
from kgate.support import jsondoc, tools
from kgate.support import scratch as made_scratch
from kgate.support.atomicio import read_cached


@dataclass(frozen=True)
class Distribution:
    """A compiler that kgate compiles a language's kernels with, as pip installs it."""

    name: str  # the distribution pip installs: "triton"
    label: str  # how reports name it: "Triton"
    option: str  # the command line's option that names its releases: "--triton"
    language: str  # the kernels it compiles (`kgate check --language`)
    toolchain: str  # the key of the toolchain record that holds the installed release (`kgate.compile.preflight`)
    package: str  # its files under site-packages
    libraries: str  # its compiler's libraries, relative to `package`: their sizes say the install is whole
    # Whether it ships the binary tools kgate runs (Triton's wheel: ptxas, cuobjdump, nvdisasm): a release's own are
    # then its own; another's environment is lent this environment's disassembler.
    ships_tools: bool = False

    @property
    def dist_info(self) -> str:
        return self.name.replace("-", "_")


TRITON = Distribution("triton", "Triton", "--triton", "triton", "triton", "triton", "_C/libtriton*", ships_tools=True)
CUTE_DSL = Distribution("nvidia-cutlass-dsl", "CuTe DSL", "--cute-dsl", "cute", "cutlass-dsl", "nvidia_cutlass_dsl",
                        "**/_mlir_libs/*.so")
DISTRIBUTIONS = (TRITON, CUTE_DSL)

MARKER = "kgate-environment.json"


def root() -> Path:
    named = os.environ.get("KGATE_TOOLCHAINS")
    if named:
        return Path(named)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "kgate" / "toolchains"


def _name(dist: Distribution, version: str) -> str:
    return f"{dist.name}-{version}-py{sys.version_info.major}{sys.version_info.minor}"


def parse_versions(text: str, dist: Distribution = TRITON) -> list[str]:
    versions = [v.strip() for v in text.split(",") if v.strip()]
    for version in versions:
        if not all(part.isdigit() for part in version.split(".")) or version.count(".") > 3:
            raise ToolchainError(f"{dist.option} {text}: {version!r} is not a {dist.label} release number such as "
                                 f"{_EXAMPLE[dist.name]}")
    if not versions:
        raise ToolchainError(f"{dist.option} needs at least one {dist.label} release, such as {dist.option} "
                             f"{_EXAMPLE[dist.name]}")
    return list(dict.fromkeys(versions))


_EXAMPLE = {TRITON.name: "3.5.1", CUTE_DSL.name: "4.7.0"}


def _identity(folder: Path, version: str, dist: Distribution = TRITON) -> dict[str, Any] | None:
    """What the environment's record must say: the release it holds, its compiler's files' sizes, the Python it runs."""
    sites = sorted(folder.glob("lib/python*/site-packages"))
    if not sites:
        return None
    package = sites[0] / dist.package
    libraries = sorted(package.glob(dist.libraries)) if package.is_dir() else []
    if not (sites[0] / f"{dist.dist_info}-{version}.dist-info").is_dir() or not libraries:
        return None
    return {dist.name: version, "python": sys.version.split()[0],
            "files": {lib.name: lib.stat().st_size for lib in libraries}}


def _verified(folder: Path, version: str, dist: Distribution = TRITON) -> bool:
    try:
        recorded = jsondoc.loads(read_cached(folder / MARKER) or b"null")
    except (OSError, ValueError):
        return False
    return (folder / "bin" / "python").exists() and recorded == _identity(folder, version, dist)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def environment(version: str, dist: Distribution = TRITON) -> Path:
    """The Python of the environment that holds release `version` of `dist`, made on first use."""
    folder = root() / _name(dist, version)
    if _verified(folder, version, dist):
        return folder / "bin" / "python"
    with _locked(root() / f".{_name(dist, version)}.lock"):
        if _verified(folder, version, dist):  # another run made it while this one waited
            return folder / "bin" / "python"
        print(f"kgate: making an environment with {dist.label} {version} in {folder} (once; it needs the package "
              f"index)", file=sys.stderr)
        scratch = Path(tempfile.mkdtemp(prefix=f".{_name(dist, version)}.", dir=root()))
        try:
            _install(scratch, folder, version, dist)
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(scratch, folder)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return folder / "bin" / "python"


def _install(scratch: Path, folder: Path, version: str, dist: Distribution) -> None:
    """A virtual environment in `scratch` with the release installed and its record written."""
    tools.run([sys.executable, "-m", "venv", str(scratch)], timeout=300)
    wanted = [f"{dist.name}=={version}"] + (["tomli>=2"] if sys.version_info < (3, 11) else [])
    try:
        tools.run([str(scratch / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                   *wanted], timeout=1800)
    except tools.ToolFailed as exc:
        raise ToolchainError(f"cannot install {dist.label} {version} into {folder}: {exc}"
                             + (f" ({exc.output.splitlines()[-1]})" if exc.output else "")) from None
    identity = _identity(scratch, version, dist)
    if identity is None:
        raise ToolchainError(f"{dist.label} {version} did not install as expected into {scratch}")
    (scratch / MARKER).write_text(json.dumps(identity, sort_keys=True))


# The environment holds the release and nothing else, while a project's kernel modules import torch, numpy and the
# project's own packages: the child imports kgate from its tree first, then appends this environment's site folders
# (their `.pth` files read: editable installs) after its own, so `import triton` (or `cutlass`) is the release's and
# every other import is the project's, as installed here.
_SITES = "KGATE_PROJECT_SITES"
_BOOT = ("import os, runpy, site, sys\n"
         "import kgate\n"
         f"for folder in filter(None, os.environ.pop({_SITES!r}, '').split(os.pathsep)):\n"
         "    site.addsitedir(folder)\n"
         "runpy.run_module('kgate', run_name='__main__', alter_sys=True)\n")


def _project_sites() -> list[str]:
    """The site folders of the environment kgate runs in (a virtual environment's own, the system's where it
    includes them, the user's where Python reads it), in the order Python reads them."""
    import site

    folders = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    return [folder for folder in dict.fromkeys(folders) if os.path.isdir(folder)]


def _kgate_tree(into: Path) -> Path:
    """This kgate's package as one folder (its `rules` and `kernels` may live elsewhere in a checkout), linked.
    The subpackages are found where they are, not imported."""
    import importlib.util

    import kgate

    package = into / "kgate"
    package.mkdir()
    source = Path(kgate.__file__).resolve().parent
    for item in source.iterdir():
        if item.name not in ("__pycache__", "rules", "kernels"):
            (package / item.name).symlink_to(item)
    for name in ("rules", "kernels"):
        spec = importlib.util.find_spec(f"kgate.{name}")
        if spec is None or not spec.submodule_search_locations:
            raise ToolchainError(f"cannot find kgate's {name} package")
        (package / name).symlink_to(Path(next(iter(spec.submodule_search_locations))).resolve())
    return into


@dataclass
class Compiled:
    """One release's compile of the project's kernels of its language (`kgate check --format json`, its rows)."""

    version: str
    kernels: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    seconds: float


def check_with(version: str, config_path: Path | None, project: Path, argv: list[str],
               dist: Distribution = TRITON) -> Compiled:
    """`kgate check --language LANGUAGE` of the project under release `version` of `dist` (its own environment)."""
    command = ["check", "--language", dist.language, "--format", "json", "--no-baseline", "-q", *argv]
    done, seconds = run_with(version, config_path, project, command, dist)
    if done.returncode not in (0, 1):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ToolchainError(f"the check under {dist.label} {version} failed: {last}")
    try:
        data = json.loads(done.stdout)
    except ValueError:
        raise ToolchainError(f"the check under {dist.label} {version} wrote no report") from None
    return Compiled(version, data["kernels"], data["findings"], seconds)


def run_with(version: str, config_path: Path | None, project: Path, argv: list[str],
             dist: Distribution = TRITON) -> tuple[tools.Completed, float]:
    """`kgate ARGV` on the project under release `version` of `dist` (its own environment, made on first use), and
    the seconds it took; its exit status is the caller's to judge."""
    import time

    python = environment(version, dist)
    with made_scratch.folder("kgate-matrix-") as scratch:
        tree = _kgate_tree(Path(scratch))
        config = ["--config", str(config_path)] if config_path is not None else []
        command = [str(python), "-c", _BOOT, argv[0], *config, *argv[1:]]
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1",
               _SITES: os.pathsep.join(_project_sites())}
        env.pop("TRITON_PTXAS_PATH", None)  # the other release's own ptxas, not this environment's choice
        env.pop("TRITON_PTXAS_BLACKWELL_PATH", None)
        lent = tools.triton_bin_dir()
        if not dist.ships_tools and lent is not None:  # cuobjdump for the SASS, where only Triton's wheel has it
            env["PATH"] = os.pathsep.join([str(lent), *filter(None, [env.get("PATH")])])
        started = time.perf_counter()
        # The working folder is the scratch one, so the project folder (which may hold a `kgate` folder of its
        # own, as kgate's repository does) never shadows the linked package; the configuration names the project.
        env["PYTHONSAFEPATH"] = "1"  # Python 3.11+: no working folder on the path, where there is no configuration
        done = tools.run(command, cwd=scratch if config_path is not None else project, env=env, timeout=3600,
                         check=False)
        return done, time.perf_counter() - started
