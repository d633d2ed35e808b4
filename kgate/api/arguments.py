"""What each argument of `kgate.api`'s functions accepts, in one table, and the one check every function runs.

The command line's parser refuses a mistyped flag value before anything runs (`--jobs two`, `--language Triton`,
`--fail-on bogus`); a Python caller gets the same refusal, as `api.KgateError`, for the same rules: the choices
are the parser's own (`kgate.core.schema`), a count of workers is a positive integer, a folder to run in
exists. A string where a list is expected is refused rather than split into characters (`targets="sm_120a"`
would be the targets "s", "m", ...; `kernels="mul*"` the globs "m", "u", "l" and "*", which gate every
kernel); the codes of `select` are the one exception, where the command line's comma-separated string is kept.

`validated` wraps each function: it binds the call to the function's signature (an unknown keyword or one
argument too many is an `ArgumentError` too, with the nearest name) and checks every bound argument against
`ACCEPTS`, which must name every parameter of every function it wraps (a test holds it to that).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kgate.core.errors import KgateError
from kgate.core.schema import FAIL_ON, LANGUAGES

F = TypeVar("F", bound=Callable[..., Any])


class ArgumentError(KgateError, TypeError, ValueError):
    """An argument a `kgate.api` function does not accept: a `KgateError` (the command line's exit 2), and the
    TypeError or ValueError Python code expects of a bad argument."""


@dataclass(frozen=True)
class Accepts:
    """What one argument accepts: `check(value)` returns why it is refused (a few words), or None."""

    what: str  # for the message: "a folder", "true or false"
    check: Callable[[Any], str | None]


def _type_name(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike)) and isinstance(os.fspath(value), str) and bool(os.fspath(value))


def _boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"must be True or False, not {value!r}"


def _folder(optional: bool) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if value is None and optional:
            return None
        if not _is_path(value):
            return f"must be a folder (a str or a Path), not {_type_name(value)} {value!r}"
        if not os.path.exists(value):
            return f"{os.fspath(value)}: no such folder"
        if not os.path.isdir(value):
            return f"{os.fspath(value)}: not a folder"
        return None
    return check


def _file(value: Any) -> str | None:
    # Whether it exists is the configuration loader's to say (with the configuration's own wording).
    return None if value is None or _is_path(value) else \
        f"must be a path (a str or a Path), not {_type_name(value)} {value!r}"


def _listed(item: Callable[[Any], bool], noun: str, *, comma_string: bool = False) -> Callable[[Any], str | None]:
    """A list (or tuple) whose every item passes `item`; a lone string or path is refused, not split."""
    def check(value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, (str, bytes, os.PathLike)) and not (comma_string and isinstance(value, str)):
            # The list holding it is advised only where that list would be taken (not `[b"KG201"]`).
            advice = f" (give [{value!r}])" if item(value) else ""
            return f"must be a list of {noun}, not the single {_type_name(value)} {value!r}{advice}"
        if comma_string and isinstance(value, str):
            return None
        if isinstance(value, (set, frozenset, dict)) or not isinstance(value, (list, tuple)):
            return f"must be a list of {noun}, not {_type_name(value)} {value!r}"
        bad = next((v for v in value if not item(v)), _NOTHING)
        if bad is not _NOTHING:
            return f"must be a list of {noun}; {_type_name(bad)} {bad!r} is not one"
        return None
    return check


_NOTHING = object()


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _choice(choices: tuple[str, ...], *, optional: bool = True, also: tuple[type, ...] = ()) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if (value is None and optional) or (also and isinstance(value, also)):
            return None
        if isinstance(value, str) and value in choices:
            return None
        near = ""
        if isinstance(value, str):
            from kgate.support.suggest import closest

            found = closest(value, choices)
            near = f"; did you mean {found!r}?" if found else ""
        return f"must be one of {', '.join(map(repr, choices))}{' or None' if optional else ''}, not {value!r}{near}"
    return check


def _positive_int(value: Any) -> str | None:
    """`-j N`'s rule (`kgate.cli`): a positive integer; None is the default (every core)."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return f"must be a positive integer, not {value!r}"
    return None


def _callable(value: Any) -> str | None:
    """A function kgate can call with (done, total, label): one that cannot take three arguments would raise only
    once the first variant compiles, after the run began."""
    if value is None:
        return None
    if not callable(value):
        return f"must be a function (done, total, label), not {value!r}"
    import inspect

    try:
        inspect.signature(value).bind(0, 0, "")
    except TypeError:
        return f"must be a function (done, total, label), not one that cannot take three arguments ({value!r})"
    except ValueError:  # a builtin whose signature Python cannot tell: taken as it is
        pass
    return None


def _target(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) and value else \
        f"must be a target such as 'sm_120a', not {value!r}"


def _kernel(value: Any) -> str | None:
    # A kernel object is judged by the compile side (it knows what a JITFunction is); a name must be one.
    if isinstance(value, str) and ":" not in value:
        return f"must be the kernel itself or its name as 'package.module:function', not {value!r}"
    return None if value is not None else "must be the @triton.jit function or 'package.module:function', not None"


def _severity_type() -> tuple[type, ...]:
    from kgate.core.findings import Severity

    return (Severity,)


_FAIL_ON = _choice(FAIL_ON, also=_severity_type())

# Every argument of every function `validated` wraps, by name: what it accepts.
ACCEPTS: dict[str, Accepts] = {
    "project": Accepts("a folder that exists", _folder(optional=True)),
    "config": Accepts("a path to pyproject.toml or kgate.toml", _file),
    "paths": Accepts("a list of files or folders", _listed(_is_path, "files or folders")),
    "select": Accepts("rule codes, prefixes or names", _listed(_text, "rule codes", comma_string=True)),
    "extend_select": Accepts("rule codes, prefixes or names", _listed(_text, "rule codes", comma_string=True)),
    "ignore": Accepts("rule codes, prefixes or names", _listed(_text, "rule codes", comma_string=True)),
    "targets": Accepts("a list of targets", _listed(_text, "targets such as 'sm_120a'")),
    "kernels": Accepts("a list of kernel globs", _listed(_text, "kernel globs such as 'matmul*'")),
    "language": Accepts("'triton', 'cuda' or None", _choice(LANGUAGES)),
    "jobs": Accepts("a positive integer or None", _positive_int),
    "fail_on": Accepts("a severity", _FAIL_ON),
    "progress": Accepts("a function (done, total, label) or None", _callable),
    "sass": Accepts("true or false", _boolean),
    "cache": Accepts("true or false", _boolean),
    "baseline": Accepts("true or false", _boolean),
    "force_exclude": Accepts("true or false", _boolean),
    "kernel": Accepts("a Triton kernel or 'package.module:function'", _kernel),
    "target": Accepts("a target such as 'sm_120a', or None", _target),
}
# Parameters whose values are checked by the code they are handed to: a registration's fields
# (`kgate.core.config.parse_triton_entry`, with the configuration's own messages).
CHECKED_DOWNSTREAM = frozenset({"fields"})


def refusal(function: str, name: str, value: Any) -> ArgumentError | None:
    """The error for `value` as argument `name` of `function`, or None where it is accepted."""
    why = ACCEPTS[name].check(value)
    if why is None:
        return None
    return ArgumentError(f"{function}(): {name}: {why}")


def validated(function: F) -> F:
    """`function` with its arguments checked against `ACCEPTS` before it runs (see the module's docstring)."""
    signature = inspect.signature(function)
    name = function.__name__
    unknown = [p for p in signature.parameters if p not in ACCEPTS and p not in CHECKED_DOWNSTREAM]
    if unknown:  # a new parameter must say what it accepts
        raise AssertionError(f"{name}: no entry in ACCEPTS for {', '.join(unknown)}")

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise ArgumentError(f"{name}(): {exc}{_nearest_keyword(signature, kwargs)}") from None
        for key, value in bound.arguments.items():
            if key in ACCEPTS:
                error = refusal(name, key, value)
                if error is not None:
                    raise error
        from kgate.support import workdir

        problem = workdir.unusable()
        if problem is not None:
            raise KgateError(f"{name}(): {problem}")
        return function(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _nearest_keyword(signature: inspect.Signature, kwargs: dict[str, Any]) -> str:
    from kgate.support.suggest import closest

    if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        return ""
    names = [p for p in signature.parameters]
    for key in kwargs:
        if key not in names:
            found = closest(key, names)
            return f"; did you mean {found!r}?" if found else ""
    return ""
