"""A specialisation: exactly what Triton compiles for one launch, and so exactly what kgate gates.

Triton's launcher binds a launch's arguments and decides, from their values, what to compile:
the type of every run-time argument, which arguments it may assume divisible by 16, which
integers equal to 1 (and `None` arguments) become constants, the constexpr values (dtypes,
`None` and `triton.heuristics` results included) and the compile options. A `Specialization`
holds that decision; it comes from `kgate capture` (a real run) or from binding a
registration's example arguments through the same launcher in a compile worker
(`kgate.capture.runtime.bind`). Every parameter of the kernel is in exactly one of
`signature`, `constexprs`, `equal_to_1` and `none`.

Values are kept in the form kgate's files hold them (TOML has no `None` and no dtypes):
`None` is "None", a dtype "tl.bfloat16", a `@triton.jit` function "jit:module:qualname".

A variant's name is readable where it can be (constexprs and options, as kgate always named
variants, then the pointers' element types) and ends with a tag, eight hex digits of the rest of
the specialisation (argument types, divisibility, constants, and any value the readable part shows as it
would show another: the string constexpr "1" and the integer 1), so two launches that compile differently never
share a name: `BLOCK=1024,warps=4,stages=3,bf16+fp32#3fa2c1d0`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

# Options shown in the readable part of a variant name, with their short names.
_SHORT = {"num_warps": "warps", "num_stages": "stages", "num_ctas": "ctas", "maxnreg": "maxnreg"}


@dataclass(frozen=True)
class Specialization:
    kernel: str  # "package.module:function"
    signature: dict[str, str]  # run-time arguments that stay arguments: Triton's type string
    constexprs: dict[str, Any] = field(default_factory=dict)  # declared tl.constexpr parameters
    divisible: tuple[str, ...] = ()  # specialised as divisible by 16
    equal_to_1: tuple[str, ...] = ()  # run-time integers equal to 1, compiled as the constant 1
    none: tuple[str, ...] = ()  # run-time arguments passed as None, compiled as constants
    options: dict[str, Any] = field(default_factory=dict)  # num_warps, num_stages and non-default options

    @property
    def num_warps(self) -> int:
        return int(self.options.get("num_warps", 4))

    @property
    def num_stages(self) -> int:
        return int(self.options.get("num_stages", 3))

    @property
    def pdl(self) -> bool:
        return bool(self.options.get("launch_pdl", False))

    @property
    def tag(self) -> str:
        """Eight hex digits of what the readable name leaves out (and of the values it shows ambiguously)."""
        rest: list[Any] = [self.signature, sorted(self.divisible), sorted(self.equal_to_1), sorted(self.none)]
        # A value the readable name shows as another would be (the string "1" as the integer 1, a string holding
        # `,NAME=` as two values) is told apart here, with its type; every other name is as it always was.
        unclear = {f"{kind}:{name}": value for kind, values in (("c", self.constexprs), ("o", self.options))
                   for name, value in values.items() if _shown_as_another(value)}
        if unclear:
            rest.append(unclear)
        blob = json.dumps(rest, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:8]

    @property
    def variant(self) -> str:
        name = readable_name(self.constexprs, self.options)
        dtypes = pointee_types(self.signature)
        return f"{name},{dtypes}#{self.tag}" if dtypes else f"{name}#{self.tag}"

    def report(self) -> dict[str, list[str]]:
        """The `specialization` of a JSON report row."""
        return {"divisible_by_16": sorted(self.divisible), "equal_to_1": sorted(self.equal_to_1),
                "none": sorted(self.none)}

    def to_record(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "signature": dict(self.signature), "constexprs": dict(self.constexprs),
                "divisible": sorted(self.divisible), "equal_to_1": sorted(self.equal_to_1),
                "none": sorted(self.none), "options": dict(self.options)}

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> Specialization:
        """From a record (a capture file entry, a worker's binding); raises ValueError naming what is wrong."""
        if not isinstance(data, dict):
            raise ValueError("a specialisation is a table")
        kernel = data.get("kernel")
        module, _, function = kernel.partition(":") if isinstance(kernel, str) else ("", "", "")
        if not isinstance(kernel, str) or not module or not all(part.isidentifier() for part in module.split(".")) or not function.isidentifier():
            raise ValueError("kernel: must be \"package.module:function\"")  # as `kgate capture` writes it
        signature = _table(data.get("signature", {}), "signature")
        for name, ty in signature.items():
            if not isinstance(ty, str) or not ty or ty == "constexpr" or ty != ty.strip() or not ty.isprintable():
                raise ValueError(f"signature.{name}: must be a Triton type string such as \"*fp16\" or \"i32\"")
        constexprs = _table(data.get("constexprs", {}), "constexprs")
        for name, value in constexprs.items():
            if not _constant(value):
                raise ValueError(f"constexprs.{name}: must be a number (an integer within 64 bits), boolean, string "
                                 f"or a list of them")
        lists = {key: _names(data.get(key, []), key) for key in ("divisible", "equal_to_1", "none")}
        options = _table(data.get("options", {}), "options")
        for key in ("num_warps", "num_stages"):
            value = options.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"options.{key}: must be a positive integer")
        for key, value in options.items():
            if not _constant(value):  # every value of a specialisation is written to the capture file, as TOML
                raise ValueError(f"options.{key}: must be a number (an integer within 64 bits), boolean, string or "
                                 f"a list of them")
        placed: dict[str, str] = {}
        for where, names in (("signature", list(signature)), ("constexprs", list(constexprs)),
                             ("equal_to_1", lists["equal_to_1"]), ("none", lists["none"])):
            for name in names:
                if name in placed:
                    raise ValueError(f"{name!r} is in both {placed[name]} and {where}")
                placed[name] = where
        odd = [name for name in lists["divisible"] if name not in signature]
        if odd:
            raise ValueError(f"divisible: {odd[0]!r} is not a run-time argument in the signature")
        return cls(kernel, dict(signature), dict(constexprs), tuple(sorted(lists["divisible"])),
                   tuple(sorted(lists["equal_to_1"])), tuple(sorted(lists["none"])), dict(options))

    def mismatch(self, params: list[dict[str, Any]]) -> str | None:
        """Why this specialisation no longer fits the kernel's parameters (a stale capture), or None."""
        names = [p["name"] for p in params]
        declared = {p["name"] for p in params if p["constexpr"]}
        here = set(self.signature) | set(self.constexprs) | set(self.equal_to_1) | set(self.none)
        gone = sorted(here - set(names))
        if gone:
            return f"the kernel has no parameter {', '.join(gone)} any more"
        new = [name for name in names if name not in here]
        if new:
            return f"the kernel has new parameter(s) {', '.join(new)}"
        now_constexpr = sorted(declared - set(self.constexprs))
        if now_constexpr:
            return f"{', '.join(now_constexpr)} became tl.constexpr"
        no_longer = sorted(set(self.constexprs) - declared)
        if no_longer:
            return f"{', '.join(no_longer)} is no longer tl.constexpr"
        return self._binds_otherwise(params)

    def _binds_otherwise(self, params: list[dict[str, Any]]) -> str | None:
        """Why the launcher binds a captured argument otherwise now, where the parameters say how they are bound (the
        imported kernel's: `annotation`, its type string; `do_not_specialize`, `do_not_specialize_on_alignment`)."""
        for param in params:
            name, captured = param["name"], self.signature.get(param["name"])
            annotated = param.get("annotation") or ""
            if captured is not None and annotated and annotated != captured:
                return f"{name} is annotated {annotated} now (captured as {captured})"
            unspecialised = param.get("do_not_specialize") and (name in self.equal_to_1 or (
                name in self.divisible and not (captured or "").startswith("*")))
            if unspecialised:
                return f"{name} is in do_not_specialize now (captured as specialised)"
            if param.get("do_not_specialize_on_alignment") and name in self.divisible:
                return f"{name} is in do_not_specialize_on_alignment now (captured as divisible by 16)"
        return None


def readable_name(constexprs: dict[str, Any], options: dict[str, Any]) -> str:
    """Constexprs, then warps and stages, then the other options that are set: `BLOCK=64,warps=4,stages=3`."""
    parts = [f"{k}={format_value(v)}" for k, v in sorted(constexprs.items())]
    parts += [f"warps={options.get('num_warps', 4)}", f"stages={options.get('num_stages', 3)}"]
    for key in sorted(options):
        value = options[key]
        if key in ("num_warps", "num_stages") or value is None:
            continue
        if key == "launch_pdl":
            if value:
                parts.append("pdl")
        elif key == "num_ctas" and value == 1:
            continue
        else:
            parts.append(f"{_SHORT.get(key, key)}={format_value(value)}")
    return ",".join(parts)


def pointee_types(signature: dict[str, str]) -> str:
    """The element types of the pointer arguments, each once, sorted (the name must not depend on the order a
    file lists the signature in): "bf16+fp32"."""
    return "+".join(sorted({ty[2:] if ty.startswith("*k") else ty[1:] for ty in signature.values()
                            if ty.startswith("*")}))


# The longest value a variant's name shows whole; a longer one (a string constexpr of a generated kernel, a long
# tuple) is shown by its start and a hash of all of it, so the name stays one row of the table and stays unique.
LONGEST_SHOWN = 40


def format_value(value: Any) -> str:
    text = _formatted(value)
    if len(text) <= LONGEST_SHOWN:
        return text
    digest = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:8]
    return f"{text[:16]}...{digest}"


def _formatted(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "(" + ",".join(_formatted(v) for v in value) + ")"
    return str(value)


def _shown_as_another(value: Any) -> bool:
    """Whether a variant's name shows `value` as it would show another value: a string that reads as a number, a
    boolean or a list (`"1"`, `"nan"`, `"true"`, `"(2,3)"`), or that holds the separators between values (`,`,
    `=`); a list holding such a string."""
    if isinstance(value, list):
        return any(_shown_as_another(v) for v in value)
    if not isinstance(value, str):
        return False
    if value in ("true", "false") or any(c in value for c in ",=()"):
        return True
    try:
        float(value)
    except ValueError:
        return False
    return True


def _table(value: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"{key}: must be a table")
    return value


def _names(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key}: must be a list of argument names")
    if len(set(value)) != len(value):
        raise ValueError(f"{key}: names an argument twice")
    return value


def _constant(value: Any) -> bool:
    if isinstance(value, list):
        return all(_constant(v) for v in value)
    if isinstance(value, int) and not isinstance(value, bool):
        return -2**63 <= value < 2**63  # TOML's integers, which the capture file writes it as, are 64-bit
    return isinstance(value, (bool, float, str))
