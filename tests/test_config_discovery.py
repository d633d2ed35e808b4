"""One answer to "which configuration file applies here", for the full run and for the replay of an unchanged
one (kgate.core.discovery): the nearest kgate.toml, or pyproject.toml with a tool.kgate key, from the folder up."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kgate.core.config import load_config
from kgate.core.discovery import find_config
from kgate.core.errors import ConfigError
from kgate.pipeline import fastpath

KGATE_TABLE = '[tool.kgate]\ntargets = ["sm_120a"]\n'


def layout(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    (root / "a" / "b").mkdir(parents=True, exist_ok=True)
    return root / "a" / "b"


@pytest.mark.parametrize(("files", "expected"), [
    ({"kgate.toml": "", "pyproject.toml": KGATE_TABLE}, "kgate.toml"),  # kgate.toml first in a folder
    ({"pyproject.toml": KGATE_TABLE}, "pyproject.toml"),
    ({"pyproject.toml": "[tool.kgate.options.spill]\n"}, "pyproject.toml"),  # a sub-table alone
    ({"pyproject.toml": "[tool]\nkgate = { targets = ['sm_120a'] }\n"}, "pyproject.toml"),  # no header: parsed
    ({"kgate.toml": "", "a/pyproject.toml": "[project]\nname = 'x'\n"}, "kgate.toml"),  # not kgate's: passed over
    # Mentioned in a comment or a string only: not kgate's either.
    ({"kgate.toml": "", "a/pyproject.toml": "# see [tool.kgate] in kgate.toml\n[project]\nname = 'kgate-x'\n"},
     "kgate.toml"),
    # One that never mentions kgate is not read as TOML at all: a broken one is another tool's problem.
    ({"kgate.toml": "", "a/pyproject.toml": "[project\nname = \n"}, "kgate.toml"),
    ({"kgate.toml": "", "a/b/kgate.toml": ""}, "a/b/kgate.toml"),  # the nearest
])
def test_the_nearest_configuration_upwards(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    start = layout(tmp_path, files)
    found = find_config(start)
    assert found == str(tmp_path.resolve() / expected)
    assert fastpath.find_config is find_config  # the replay keys its record on the same file
    assert load_config(start=start).source == Path(found)


def test_none_found_gives_the_defaults(tmp_path: Path) -> None:
    start = layout(tmp_path, {"pyproject.toml": "[project]\nname = 'x'\n"})
    if find_config(tmp_path.parent) is not None:
        pytest.skip("a configuration above the temporary folder")
    assert find_config(start) is None and load_config(start=start).source is None


@pytest.mark.parametrize("text", ["[tool.kgate]\ntargets = [\n", "[tool]\nkgate = \n", "[tool]\nkgate = 1\n"])
def test_a_broken_kgate_pyproject_is_reported_not_passed_over(tmp_path: Path, text: str) -> None:
    start = layout(tmp_path, {"kgate.toml": "", "a/pyproject.toml": text})
    assert find_config(start) == str(tmp_path.resolve() / "a" / "pyproject.toml")
    with pytest.raises(ConfigError, match="pyproject.toml"):
        load_config(start=start)


def test_a_pyproject_that_cannot_be_read_is_reported(tmp_path: Path) -> None:
    start = layout(tmp_path, {"kgate.toml": "", "a/pyproject.toml": "[project]\nname = 'x'\n"})
    os.chmod(tmp_path / "a" / "pyproject.toml", 0)
    try:
        if os.access(tmp_path / "a" / "pyproject.toml", os.R_OK):
            pytest.skip("file permissions do not hold for this user")
        assert find_config(start) == str(tmp_path.resolve() / "a" / "pyproject.toml")
    finally:
        os.chmod(tmp_path / "a" / "pyproject.toml", 0o644)


def test_the_start_is_resolved_through_symbolic_links(tmp_path: Path) -> None:
    layout(tmp_path / "real", {"kgate.toml": ""})
    (tmp_path / "link").symlink_to(tmp_path / "real" / "a")
    assert find_config(tmp_path / "link" / "b") == str((tmp_path / "real" / "kgate.toml").resolve())
