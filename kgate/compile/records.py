"""The shapes of the cache's records, checked when they are read back.

A record is written whole (kgate.compile.cache.atomic_write), but what is
read back may still not be one of kgate's records: a disk error, a hand
edit, an older kgate's layout. Each check raises (KeyError, TypeError or
ValueError) on anything but the shape the compile engines wrote; the cache
then answers None and the record is rebuilt, so a bad record costs a
compile, never a crash or a wrong verdict.
"""

from __future__ import annotations

from typing import Any

from kgate.facts.model import KernelFacts


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise ValueError(f"not a kgate cache record: {what}")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def facts(record: Any) -> None:
    """v1/facts/<key>.json: one KernelFacts."""
    KernelFacts.from_record(record)


def expansion(record: Any) -> None:
    """v1/expand/<key>.json: what importing a registered Triton kernel told the planner."""
    _require(isinstance(record, dict), "expansion")
    _require(isinstance(record["path"], str) and _int(record["line"]), "path and line")
    _require(isinstance(record["uses_dot_scaled"], bool), "uses_dot_scaled")
    for param in record["params"]:
        _require(isinstance(param["name"], str) and isinstance(param["constexpr"], bool)
                 and isinstance(param["has_default"], bool), "params")
    _require(isinstance(record["heuristics"], list) and all(isinstance(n, str) for n in record["heuristics"]),
             "heuristics")
    for config in record["configs"]:
        _require(isinstance(config["kwargs"], dict) and _int(config["num_warps"]) and _int(config["num_stages"])
                 and (config.get("maxnreg") is None or _int(config["maxnreg"])), "configs")


def spans(record: Any) -> None:
    """v1/spans/<key>.json: top-level definition name -> [first line, last line]."""
    _require(isinstance(record, dict), "spans")
    for name, span in record.items():
        _require(isinstance(span, list) and len(span) == 2 and all(_int(v) for v in span), f"span of {name}")


def cuda(record: Any) -> None:
    """v1/cuda/<key>.json: the kernels of one CUDA source and target, or the compiler's error."""
    _require(isinstance(record, dict) and isinstance(record["kernels"], list), "CUDA record")
    if "error" in record:
        _require(isinstance(record["error"], str) and _int(record.get("line", 1)), "error")
    for item in record["kernels"]:
        _require(isinstance(item, dict) and isinstance(item["symbol"], str), "kernel symbol")
        KernelFacts.from_record({k: v for k, v in item.items() if k != "symbol"})
