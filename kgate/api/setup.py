"""What `kgate.api`'s functions share: the project's configuration and the rule selection, from arguments."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Union

from kgate.core.config import Config, load_config
from kgate.core.selection import Selection, build_selection

PathLike = Union[str, "os.PathLike[str]"]


def project_config(project: PathLike | None, config: PathLike | None) -> Config:
    """The configuration named by `config`, else the nearest one above `project` (default: the current folder)."""
    if config is not None:
        named = Path(config)
        if not named.is_absolute() and project is not None:
            named = Path(project) / named
        return load_config(named)
    return load_config(None, start=Path(project) if project is not None else None)


def selection_of(config: Config, select: Sequence[str] | None, extend_select: Sequence[str] | None,
                 ignore: Sequence[str] | None) -> Selection:
    """The rules that run: the configuration's selection, with these codes, prefixes or names in front of it."""
    return build_selection(config, select=_codes(select), extend_select=_codes(extend_select), ignore=_codes(ignore))


def _codes(value: Sequence[str] | None) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):  # "KG1,spill", as the command line takes it
        value = value.split(",")
    return [v.strip() for v in value if v.strip()]
