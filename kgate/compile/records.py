"""The shapes of the compile cache's records, checked when they are read back.

A record is written whole (kgate.compile.cache), but what is read back may
still not be one of kgate's records: a disk error, a hand edit, an older
kgate's layout. Each check raises (KeyError, TypeError or ValueError) on
anything but the shape the compile engines wrote; the cache then answers
None and the record is rebuilt, so a bad record costs a compile, never a
crash or a wrong verdict. The facts stage checks its own records
(`kgate.facts.model.KernelFacts.from_record`).
"""

from __future__ import annotations

from typing import Any


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise ValueError(f"not a kgate cache record: {what}")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _hashes(value: Any, required: tuple[str, ...]) -> None:
    _require(isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) and len(v) == 64
                                             for k, v in value.items()), "artifact hashes")
    _require(all(name in value for name in required), "artifacts")


def compiled(record: Any) -> None:
    """v1/compiled/<key>.json: one Triton variant's context and the hashes of its artifacts."""
    _require(isinstance(record, dict), "compile record")
    context = record["context"]
    _require(isinstance(context, dict) and all(isinstance(context[k], str) for k in ("kernel", "variant", "target",
                                                                                     "path")), "context")
    _require(_int(context["line"]), "line")
    _hashes(record["artifacts"], ("ptx", "ptxas_log"))
    _require(_int(record["dynamic_smem"]), "dynamic_smem")


def expansion(record: Any) -> None:
    """v1/expand/<key>.json: what importing a registered Triton kernel told the planner."""
    _require(isinstance(record, dict), "expansion")
    _require(isinstance(record["path"], str) and _int(record["line"]), "path and line")
    for param in record["params"]:
        _require(isinstance(param["name"], str) and isinstance(param["constexpr"], bool)
                 and isinstance(param["has_default"], bool), "params")
    _require(isinstance(record["heuristics"], list) and all(isinstance(n, str) for n in record["heuristics"]),
             "heuristics")
    for config in record["configs"]:
        _require(isinstance(config["kwargs"], dict) and _int(config["num_warps"]) and _int(config["num_stages"])
                 and (config.get("maxnreg") is None or _int(config["maxnreg"])), "configs")
    keys = record.get("keys", [])
    _require(isinstance(keys, list) and all(isinstance(k, str) for k in keys), "keys")


def spans(record: Any) -> None:
    """v1/spans/<key>.json: top-level definition name -> [first line, last line]."""
    _require(isinstance(record, dict), "spans")
    for name, span in record.items():
        _require(isinstance(span, list) and len(span) == 2 and all(_int(v) for v in span), f"span of {name}")


def cuda(record: Any) -> None:
    """v1/cuda/<key>.json: one CUDA file's artifacts for one target, or the compiler's error."""
    _require(isinstance(record, dict), "cuda record")
    if "error" in record:
        _require(isinstance(record["error"], str) and _int(record.get("line", 1)), "error")
        return
    _hashes(record["artifacts"], ("ptx", "ptxas_log"))
    context = record["context"]
    _require(isinstance(context, dict) and all(isinstance(context[k], str) for k in ("root", "source", "cwd", "rel",
                                                                                     "target")), "context")
    _require(isinstance(context["aliases"], list) and isinstance(context["toolchain"], dict), "context")
    symbols = record.get("sass_symbols")
    _require(symbols is None or isinstance(symbols, list) and all(isinstance(s, str) for s in symbols),
             "sass_symbols")


def probe(record: Any) -> None:
    """v1/cuda-probe/<key>.json: the bytes of each shared memory size a file's probe settled, by the index of the
    size asked (`kgate.compile.cuda_probe`)."""
    _require(isinstance(record, dict) and isinstance(record["sizes"], dict), "probe record")
    _require(all(isinstance(k, str) and k.isdigit() and _int(v) and v >= 0 for k, v in record["sizes"].items()),
             "probe sizes")
