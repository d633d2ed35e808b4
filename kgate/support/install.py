"""What to install for a part of kgate that is optional, said as a command that works however kgate was installed.

kgate's distribution is `kernel-gate`: the name `kgate` on the Python package index belongs to another
project, so asking pip for `kgate`, with or without an extra, installs that project, never this one. The import name and
the command stay `kgate`. A hint names the packages a part needs, which install from the index the same way
whether kgate came from the index, a git URL or a checkout, and the extra of kgate's that carries them.
"""

from __future__ import annotations

DISTRIBUTION = "kernel-gate"

# The optional extras as pyproject.toml declares them (tests/test_install.py holds the two equal).
EXTRAS: dict[str, tuple[str, ...]] = {
    "cuda": ("cuda-python>=13", "nvidia-cuda-nvrtc>=13"),
    "cute": ("nvidia-cutlass-dsl>=4.8",),
    "fix": ("libcst>=1.1",),
    "ulp": ("torch>=2.4", "numpy", "pytest>=8"),
}


def _name(requirement: str) -> str:
    for mark in "<>=!~[; ":
        requirement = requirement.split(mark, 1)[0]
    return requirement


def install_hint(extra: str, missing: tuple[str, ...] | list[str] | None = None) -> str:
    """`pip install 'libcst>=1.1'` (kgate's extra `fix`: kernel-gate[fix]); only the missing ones when given."""
    wanted = [r for r in EXTRAS[extra] if missing is None or _name(r) in missing]
    packages = " ".join(f"'{r}'" if any(c in r for c in "<>=!~") else r for r in wanted)
    return f"pip install {packages} (kgate's extra {extra}: {DISTRIBUTION}[{extra}])"
