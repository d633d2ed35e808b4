"""The size of the environment pre-commit builds for the `kgate-lint` hook, next to ruff's, in one run.

    python bench/hook_env_bench.py

pre-commit installs a `language: python` hook by creating a virtual environment and `pip install`ing
the hook's repository into it. This does the same, once for kgate (this checkout) and once for ruff,
and prints both sizes on disk (the fresh environment itself, pip included, is counted in both) and
their ratio. Needs a package index.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def size_mb(folder: Path) -> float:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total / 2**20


def environment(requirement: str, scratch: Path, name: str) -> tuple[float, list[str]]:
    env = scratch / name
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    subprocess.run([str(env / "bin" / "pip"), "install", "--quiet", requirement], check=True,
                   stdout=subprocess.DEVNULL)
    listed = subprocess.run([str(env / "bin" / "pip"), "list", "--format", "freeze"], check=True,
                            capture_output=True, text=True).stdout.split()
    return size_mb(env), listed


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        kgate, kgate_packages = environment(str(REPO), Path(scratch), "kgate")
        ruff, ruff_packages = environment("ruff", Path(scratch), "ruff")
    print(f"machine: Python {sys.version.split()[0]}, {os.uname().machine}")
    print(f"{'kgate-lint hook environment':<32} {kgate:>8.1f} MB  ({', '.join(kgate_packages)})")
    print(f"{'ruff hook environment':<32} {ruff:>8.1f} MB  ({', '.join(ruff_packages)})")
    print(f"{'ratio':<32} {kgate / ruff:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
