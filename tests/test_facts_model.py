"""A fact is one extractor and one declared field: the builder, the JSON record and the cache key follow.

Built on checked-in output of the real compiler (tests/data: ptxas 13.x for sm_120a); the values are compared
with what the parsers read from the same files, never with numbers written here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import DATA

from kgate.compile.cache import Cache
from kgate.compile.units import Artifacts, Compiled
from kgate.core.artifacts import Artifact
from kgate.facts.build import unit_facts
from kgate.facts.extract import Sources, load_optional_count
from kgate.facts.model import KernelFacts, context_fields, derived_fields, fact, facts_schema
from kgate.facts.ptxas_log import parse_ptxas_log
from kgate.facts.run import Facts, check_record
from kgate.facts.sass import parse_sass

CONTEXT = {"kernel": "tile:mxfp8_tile", "variant": "BM=128", "target": "sm_120a", "language": "triton",
           "path": "tile.py", "line": 3, "kind": "gemm", "num_warps": 4, "num_stages": 2, "expect": ["block_scale"],
           "pdl": False}


def sass_instructions(src: Sources, entry: str) -> int | None:
    """How many instructions the entry's SASS holds (None where the cubin was not disassembled)."""
    functions = src.sass
    found = functions.get(entry) if functions else None
    return None if found is None else sum(found.opcodes.values())


def sass_instructions_counted_otherwise(src: Sources, entry: str) -> int | None:
    functions = src.sass
    return None if not functions or entry not in functions else len(functions[entry].opcodes)


# The whole registration of a new fact: the extractor above and this one field.
@dataclass(frozen=True)
class WithInstructions(KernelFacts):
    sass_instructions: int | None = fact(sass_instructions, reads=frozenset({Artifact.SASS}), load=load_optional_count,
                                         default=None)


@dataclass(frozen=True)
class CountedOtherwise(KernelFacts):
    sass_instructions: int | None = fact(sass_instructions_counted_otherwise, reads=frozenset({Artifact.SASS}),
                                         load=load_optional_count, default=None)


def _unit(tmp_path: Path) -> tuple[Compiled, Sources]:
    artifacts = Artifacts(ptx=(DATA / "mxfp8_tile.sm_120a.ptx").read_text(),
                          ptxas_log=(DATA / "mxfp8_tile.sm_120a.ptxas.log").read_text(),
                          sass=(DATA / "mxfp8_tile.sm_120a.sass").read_text(), dynamic_smem=1024)
    unit = Compiled(key="k" * 64, folder=tmp_path, language="triton", target="sm_120a",
                    hashes={"ptx": "0" * 64, "ptxas_log": "1" * 64, "sass": "2" * 64}, context=CONTEXT,
                    dynamic_smem=1024)
    return unit, Sources(artifacts)


def test_a_declared_fact_is_built_read_back_and_part_of_the_cache_key(tmp_path: Path) -> None:
    unit, src = _unit(tmp_path)
    ((entry, facts),) = unit_facts(unit, src, WithInstructions)
    expected = sum(parse_sass((DATA / "mxfp8_tile.sm_120a.sass").read_text())[entry].opcodes.values())
    assert facts.sass_instructions == expected and expected > 0
    # Every other field is what the stock model reads from the same artifacts.
    ((_, stock),) = unit_facts(unit, src)
    assert {n: getattr(facts, n) for n in vars(stock)} == vars(stock)
    assert [f.name for f in derived_fields(WithInstructions)][-1] == "sass_instructions"
    assert "sass_instructions" not in context_fields(WithInstructions)
    # The record keeps it and is read back whole; a value of another type is refused, not trusted.
    check_record({"kernels": [[entry, facts.to_json()]]}, WithInstructions)
    assert WithInstructions.from_record(facts.to_json()) == facts
    with pytest.raises(ValueError):
        WithInstructions.from_record({**facts.to_json(), "sass_instructions": "many"})
    # The schema, and with it every facts record's key, changes by itself: with the field, and with its extractor.
    schemas = {facts_schema(KernelFacts), facts_schema(WithInstructions), facts_schema(CountedOtherwise)}
    assert len(schemas) == 3
    cache = Cache(tmp_path)
    keys = {Facts(cache, model).key(unit) for model in (KernelFacts, WithInstructions, CountedOtherwise)}
    assert len(keys) == 3
    assert facts_schema(WithInstructions) == facts_schema(WithInstructions)  # and only then


def test_the_builder_reads_resources_from_the_log_with_the_launch_s_dynamic_shared_memory(tmp_path: Path) -> None:
    unit, src = _unit(tmp_path)
    ((entry, facts),) = unit_facts(unit, src)
    figures = parse_ptxas_log((DATA / "mxfp8_tile.sm_120a.ptxas.log").read_text())[entry]
    assert (facts.resources.registers, facts.resources.stack_bytes, facts.resources.smem_static) == (
        figures.registers, figures.stack_frame, figures.smem_static)
    assert facts.resources.smem_bytes == figures.smem_static + 1024
    assert facts.sass is not None and facts.sass.opcodes == parse_sass(src.artifacts.sass or "")[entry].opcodes
