"""Another revision of the project, for `kgate diff BASE`: which one, and a checkout of it.

The base is checked out with `git worktree add --detach` into a temporary folder of its own, so the
working tree (and whatever is uncommitted in it) is never touched, and removed again when the diff ends,
however it ends (an error, Ctrl-C, a SIGTERM from CI). Its git submodules are checked out in it too, each at
the commit the base records, from the working tree's own clone of it or, where the working tree no longer has
one, the clone git keeps in the repository's `modules/` folder (nothing is fetched).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from kgate.core.errors import ConfigError
from kgate.support import interrupts, tools
from kgate.support import scratch as made_scratch

# The folder a base revision is checked out in; the line table of a cubin compiled there names it, and
# reports show those source paths relative to it.
CHECKOUT_PREFIX = "kgate-base-"


def _git(root: Path, *args: str, check: bool = True) -> tools.Completed:
    """git run on the repository at `root`: a working tree, or a clone's own git folder (a submodule's in the
    superproject's `modules/`, whose working tree may be gone)."""
    git = shutil.which("git")
    if git is None:
        raise ConfigError("git not found: `kgate diff` checks the base revision out with git")
    # A clone kept in `modules/` names its working tree (core.worktree), which `git rm` removed: git is told
    # that the git folder is its own working tree, so that it does not go there first.
    where = ["-C", str(root)] if not _is_git_folder(root) else ["--git-dir", str(root), "--work-tree", str(root)]
    # The checkout runs no hook of the project's (a post-checkout hook that fails, or writes, is not kgate's).
    return tools.run([git, "-c", f"core.hooksPath={os.devnull}", *where, *args], timeout=600, check=check,
                     env=_git_env(root))


# What locates a repository's parts in git's environment (`git rev-parse --local-env-vars`): set by a git hook
# kgate runs in, or by the user for the repository they name.
_LOCATING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
             "GIT_IMPLICIT_WORK_TREE", "GIT_PREFIX", "GIT_NAMESPACE", "GIT_GRAFT_FILE", "GIT_SHALLOW_FILE",
             "GIT_REPLACE_REF_BASE", "GIT_NO_REPLACE_OBJECTS")


def _git_env(root: Path) -> dict[str, str]:
    """The environment of a git command on `root`: never the index a hook names (GIT_INDEX_FILE is the index of the
    commit being made, which a checkout would overwrite), and the environment's repository only where it is
    `root`'s own, or `root` has none of its own (a submodule's clone is another repository)."""
    env = {k: v for k, v in os.environ.items() if k != "GIT_INDEX_FILE"}
    named = env.get("GIT_DIR")
    own = _own_git_folder(root) if named is not None else None
    if named is None or own is not None and os.path.realpath(os.path.join(root, named)) != own:
        env = {k: v for k, v in env.items() if k not in _LOCATING}
    return env


@functools.cache
def _own_git_folder(root: Path) -> str | None:
    """The git folder of the repository `root` is in, as git finds it there without being told (None: none)."""
    if _is_git_folder(root):
        return os.path.realpath(root)
    env = {k: v for k, v in os.environ.items() if k not in _LOCATING and k != "GIT_INDEX_FILE"}
    done = tools.run([shutil.which("git") or "git", "-C", str(root), "rev-parse", "--absolute-git-dir"], env=env,
                     check=False)
    return os.path.realpath(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def _is_git_folder(folder: Path) -> bool:
    return (folder / "HEAD").is_file() and (folder / "objects").is_dir() and not (folder / ".git").exists()


def repository(folder: Path) -> Path:
    """The top folder of the git repository `folder` is in."""
    done = _git(folder, "rev-parse", "--show-toplevel", check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise ConfigError(f"{folder} is not in a git repository: `kgate diff` compares with a git revision "
                          f"(use --triton VERSION to compare toolchains on the working tree alone)")
    return Path(done.stdout.strip()).resolve()


def commit_of(root: Path, rev: str) -> str:
    """The commit a revision names; a ConfigError when it names none."""
    if rev.startswith("-"):
        raise ConfigError(f"unknown revision {rev!r}")
    # Named first, then peeled to its commit: a suffix written onto the name would be part of a `:/message` search.
    # git prints what a name that is no single revision (`HEAD^!`, `main^@`) stands for, and fails: that is no base.
    named = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", rev, check=False)
    single = named.stdout.strip() if named.returncode == 0 and len(named.stdout.split()) == 1 else ""
    done = _git(root, "rev-parse", "--verify", "--quiet", f"{single}^{{commit}}", check=False) if single else None
    if done is None or done.returncode != 0 or not done.stdout.strip():
        if _is_shallow(root):
            raise ConfigError(f"unknown revision {rev!r}: not a commit of this shallow clone's history ({_DEEPEN})")
        raise ConfigError(f"unknown revision {rev!r}: not a commit of this repository")
    return done.stdout.strip()


_DEEPEN = "fetch the history it needs: `git fetch --unshallow`, or `fetch-depth: 0` for actions/checkout"


def _is_shallow(root: Path) -> bool:
    """Whether the repository holds only part of its history (a `git clone --depth N`, CI's usual checkout)."""
    done = _git(root, "rev-parse", "--is-shallow-repository", check=False)
    return done.returncode == 0 and done.stdout.strip() == "true"


def default_base(root: Path) -> tuple[str, str]:
    """The merge base with the upstream default branch; `HEAD~1` when HEAD is on that branch (or none is
    known): a pull request's change, or the last commit's. The revision, and how to name it."""
    branch = _default_branch(root)
    head = commit_of(root, "HEAD")
    if branch is not None:
        done = _git(root, "merge-base", "HEAD", branch, check=False)
        base = done.stdout.strip()
        if done.returncode == 0 and base and base != head:
            return base, f"merge base with {branch}"
        # In a shallow clone the merge base may lie beyond the history fetched: HEAD~1 would stand in for the
        # branch's whole change and compare its last commit only.
        if done.returncode != 0 and _is_shallow(root):
            raise ConfigError(f"the merge base of HEAD and {branch} is not in this shallow clone's history: "
                              f"{_DEEPEN}, or name the base revision (`kgate diff BASE`)")
    return "HEAD~1", "HEAD~1"


def _default_branch(root: Path) -> str | None:
    for args in (("symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"),
                 ("rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}")):
        done = _git(root, *args, check=False)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    for name in ("main", "master"):
        if _git(root, "rev-parse", "--verify", "--quiet", f"refs/heads/{name}", check=False).returncode == 0:
            return name
    return None


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise interrupts.Interrupted(signum)


@contextlib.contextmanager
def checkout(root: Path, commit: str) -> Iterator[Path]:
    """The commit checked out (detached) in a temporary worktree, removed on the way out. A SIGTERM meanwhile stops
    the run as an interrupt (`kgate.support.interrupts`: never an error that the run's handling of errors could
    take), the checkout removed: the command line's own handler does so, and where nothing handles the signal (a
    program calling the API) one is installed for the checkout's length; a handler of the program's own is left."""
    scratch = made_scratch.make(CHECKOUT_PREFIX)
    tree = scratch / "tree"
    previous = None
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        previous = signal.signal(signal.SIGTERM, _terminated)
    made: list[tuple[Path, Path]] = []  # (repository, worktree) of every checkout made, the base's first
    try:
        _worktree(root, tree, commit, made)
        yield tree
    finally:
        # The submodules' checkouts, innermost first; twice forced: one a signal cut short is still locked.
        for repo, folder in reversed(made[1:]):
            _git(repo, "worktree", "remove", "--force", "--force", str(folder), check=False)
            _git(repo, "worktree", "prune", check=False)
        _git(root, "worktree", "remove", "--force", "--force", str(tree), check=False)
        shutil.rmtree(scratch, ignore_errors=True)
        made_scratch.forget(scratch)
        _git(root, "worktree", "prune", check=False)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _worktree(repo: Path, folder: Path, commit: str, made: list[tuple[Path, Path]]) -> None:
    """`commit` of `repo` checked out (detached) at `folder`, and its submodules in it, recursively."""
    made.append((repo, folder))  # before it is made: a signal during `worktree add` leaves it half made, locked
    try:
        _git(repo, "worktree", "add", "--detach", "--quiet", str(folder), commit)
    except tools.ToolFailed as exc:
        raise ConfigError(f"cannot check out {commit[:12]}: {(exc.output.strip().splitlines() or [str(exc)])[-1]}") \
            from None
    for path, pinned in _gitlinks(repo, commit):
        clone = _clone(repo, commit, path)
        if clone is None:
            raise ConfigError(f"cannot check out the submodule {path} at {pinned[:12]}: the working tree has no "
                              f"clone of it (`git submodule update --init`)")
        if _git(clone, "cat-file", "-e", f"{pinned}^{{commit}}", check=False).returncode != 0:
            raise ConfigError(f"cannot check out the submodule {path} at {pinned[:12]}: its clone does not have "
                              f"that commit (`git -C {path} fetch`)")
        with contextlib.suppress(OSError):  # the empty folder the base's checkout made for it
            (folder / path).rmdir()
        _worktree(clone, folder / path, pinned, made)


def _clone(repo: Path, commit: str, path: str) -> Path | None:
    """Where the clone of the submodule at `path` (as `commit` records it) is: in the working tree, or, where the
    working tree no longer has it (`git rm`, `git submodule deinit`), the git folder git keeps for it under the
    repository's `modules/`, by the name the commit's `.gitmodules` gives it."""
    if not _is_git_folder(repo) and ((repo / path) / ".git").exists():
        return repo / path
    for name in _submodule_names(repo, commit, path):  # where git keeps it: per worktree, as git submodule does
        done = _git(repo, "rev-parse", "--path-format=absolute", "--git-path", f"modules/{name}", check=False)
        kept = Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None
        if kept is not None and _is_git_folder(kept):
            return kept
    return None


def _submodule_names(repo: Path, commit: str, path: str) -> list[str]:
    """The names `.gitmodules` at `commit` gives the submodule at `path` (its path, where it has no file)."""
    done = _git(repo, "config", "--blob", f"{commit}:.gitmodules", "-z", "--get-regexp", r"^submodule\..*\.path$",
                check=False)
    names = []
    for entry in done.stdout.split("\0") if done.returncode == 0 else []:
        key, _, value = entry.partition("\n")
        if value == path and key.startswith("submodule.") and key.endswith(".path"):
            names.append(key[len("submodule."):-len(".path")])
    return names or [path]


def _gitlinks(repo: Path, commit: str) -> list[tuple[str, str]]:
    """(path, commit) of every submodule a commit records."""
    out = _git(repo, "ls-tree", "-r", "-z", "--full-tree", commit).stdout
    links = []
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        fields = meta.split()
        if len(fields) == 3 and fields[0] == "160000" and fields[1] == "commit":
            links.append((path, fields[2]))
    return links
