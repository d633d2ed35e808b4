"""Planning shards without compiling: units, the partition, its balance, the timings file."""

from __future__ import annotations

import json
import random
import tracemalloc
from pathlib import Path

import pytest
from conftest import FIXTURES, copy_project
from hypothesis import given, settings
from hypothesis import strategies as st

from kgate.collect.registry import triton_entries
from kgate.core.config import load_config
from kgate.core.errors import ConfigError
from kgate.shard.plan import (
    MAX_SHARDS,
    ShardSpec,
    Unit,
    assign,
    load_timings,
    parse_shard,
    plan,
    record_timings,
    units,
    weights,
)


def triton(name: str) -> Unit:
    return Unit(f"triton:{name}", kernels=(name,))


def test_shard_values() -> None:
    assert parse_shard("2/3") == ShardSpec(2, 3)
    assert parse_shard("1/1") == ShardSpec(1, 1)
    for bad in ("0/3", "4/3", "abc", "1/0", "3", "1/2/3", "-1/2", "1.0/2", ""):
        with pytest.raises(ConfigError, match="--shard"):
            parse_shard(bad)


def test_a_shard_count_past_the_bound_is_a_usage_error_whatever_its_size() -> None:
    assert parse_shard(f"{MAX_SHARDS}/{MAX_SHARDS}") == ShardSpec(MAX_SHARDS, MAX_SHARDS)
    # Past the bound, and past what fits in a machine integer or what Python converts from text.
    for count in (str(MAX_SHARDS + 1), "30000000", "99999999999999999999999", "9" * 5000):
        with pytest.raises(ConfigError, match=f"N must be at most {MAX_SHARDS}"):
            parse_shard(f"1/{count}")
    with pytest.raises(ConfigError, match="I must be between 1 and N"):
        parse_shard("99999999999999999999999/3")


def test_planning_costs_what_the_units_cost_not_what_the_shard_count_does() -> None:
    # A list of loads per shard made `--shard 1/30000000` take 10 s and 260 MB; 5 units over many shards
    # take one shard each, the lowest, like the least-loaded rule says.
    five = [triton(f"k{i}") for i in range(5)]
    tracemalloc.start()
    try:
        slices = assign(five, 10**12, {})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sorted(slices.values()) == [1, 2, 3, 4, 5]
    assert peak < 1 << 20


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.text("abcdefgh", min_size=1, max_size=6), st.floats(0.01, 100) | st.none()),
                unique_by=lambda t: t[0], min_size=1, max_size=40),
       st.integers(1, 8), st.randoms(use_true_random=False))
def test_every_unit_in_exactly_one_shard_whatever_the_order(items: list[tuple[str, float | None]], count: int,
                                                             rng: random.Random) -> None:
    all_units = [triton(name) for name, _s in items]
    seconds = {f"triton:{name}": s for name, s in items if s is not None}
    first = assign(all_units, count, seconds)
    shuffled = list(all_units)
    rng.shuffle(shuffled)
    assert assign(shuffled, count, dict(reversed(list(seconds.items())))) == first  # same inputs, same slices
    assert sorted(first) == sorted(u.id for u in all_units)
    assert set(first.values()) <= set(range(1, count + 1))
    # Longest first to the least loaded: no two shards differ by more than the heaviest unit.
    weight = weights(all_units, seconds)
    loads = [sum(weight[u] for u, shard in first.items() if shard == i) for i in range(1, count + 1)]
    assert max(loads) - min(loads) <= max(weight.values()) + 1e-9


def test_balanced_by_timings_where_identity_order_alone_is_not() -> None:
    names = [f"k{i:02d}" for i in range(12)]
    all_units = [triton(n) for n in names]
    seconds = {f"triton:{n}": (30.0 if n in ("k00", "k01", "k02") else 1.0) for n in names}
    slices = assign(all_units, 3, seconds)
    loads = {i: sum(seconds[u] for u, s in slices.items() if s == i) for i in (1, 2, 3)}
    assert sorted(loads.values()) == [33.0, 33.0, 33.0]
    assert len({slices["triton:k00"], slices["triton:k01"], slices["triton:k02"]}) == 3
    # Without timings every unit weighs the same: the heavy ones could share a slice.
    uniform = assign(all_units, 3, {})
    assert sorted(list(uniform.values()).count(i) for i in (1, 2, 3)) == [4, 4, 4]


def test_unknown_units_weigh_the_median_of_the_known_or_one() -> None:
    all_units = [triton("a"), triton("b"), triton("c"), triton("d")]
    assert weights(all_units, {"triton:a": 2.0, "triton:b": 4.0, "triton:c": 9.0}) == \
        {"triton:a": 2.0, "triton:b": 4.0, "triton:c": 9.0, "triton:d": 4.0}
    assert set(weights(all_units, {}).values()) == {1.0}
    files = Unit("cuda:x.cu+y.cu", files=("x.cu", "y.cu"))  # a group weighs what its files weigh together
    assert weights([files], {"cuda:x.cu": 1.5, "cuda:y.cu": 2.0}) == {"cuda:x.cu+y.cu": 3.5}


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    folder = copy_project("shard", tmp_path)
    for path in (FIXTURES / "compiled").glob("*.py"):
        (folder / path.name).write_bytes(path.read_bytes())
    for name in ("pdl.cu", "pdl_launch.cuh", "spill.cu", "templates.cu", "block_scale.cu", "mma.cuh",
                 "bare_unguarded.cu"):
        (folder / "csrc" / name).write_bytes((FIXTURES / "cuda" / name).read_bytes())
    return folder


def test_units_keep_cuda_files_that_share_a_templated_pdl_launch_together(project: Path) -> None:
    config = load_config(project / "kgate.toml")
    kernels = [e.kernel for e in triton_entries(config)]
    ids = [u.id for u in units(config, kernels)]
    cuda = [i for i in ids if i.startswith("cuda:")]
    # One unit per registered Triton kernel, the CUDA files below: whatever the fixtures hold.
    assert ids == sorted(ids) and len(ids) == len(set(kernels)) + len(cuda)
    assert cuda == ["cuda:csrc/bare_unguarded.cu", "cuda:csrc/block_scale.cu", "cuda:csrc/pdl.cu",
                    "cuda:csrc/scale_a.cu+csrc/scale_b.cu", "cuda:csrc/spill.cu", "cuda:csrc/templates.cu"]
    # Without template arguments at the launch site every file is a unit of its own.
    launch = project / "csrc" / "scale_b.cu"
    launch.write_text(launch.read_text().replace("pdl::launch(scale_kernel<3>,", "pdl::launch(other_kernel,"))
    cuda = [u.id for u in units(config, [e.kernel for e in triton_entries(config)]) if u.id.startswith("cuda:")]
    assert "cuda:csrc/scale_a.cu" in cuda and "cuda:csrc/scale_b.cu" in cuda


def test_plan_reads_the_timings_file_and_every_shard_plans_alike(project: Path) -> None:
    config = load_config(project / "kgate.toml")
    entries = [e.kernel for e in triton_entries(config)]
    seconds = {atom: 1.0 for unit in units(config, entries) for atom in unit.atoms}
    record_timings(config, {**seconds, "triton:pdl:not_pdl": 500.0}, set(entries))
    plans = [plan(config, entries, ShardSpec(i, 4)) for i in (1, 2, 3, 4)]
    assert len({(p.fingerprint, p.assignment_fingerprint) for p in plans}) == 1
    mine = [[u.id for u in p.mine] for p in plans]
    assert ["triton:pdl:not_pdl"] in mine  # the slowest by far has a slice to itself
    assert sorted(u for part in mine for u in part) == [u.id for u in plans[0].units]
    assert [p.runs_source for p in plans] == [True, False, False, False]
    ignored = plan(config, entries, ShardSpec(1, 4), use_timings=False)
    assert ignored.assignment_fingerprint != plans[0].assignment_fingerprint


def test_timings_file_forgets_kernels_and_files_that_are_gone(project: Path) -> None:
    config = load_config(project / "kgate.toml")
    registered = {e.kernel for e in triton_entries(config)}
    record_timings(config, {"triton:pdl:not_pdl": 1.0, "triton:old:gone": 2.0, "cuda:csrc/pdl.cu": 3.0,
                            "cuda:csrc/gone.cu": 4.0}, registered)
    record_timings(config, {"triton:pdl:wait_first": 0.5}, registered)
    path = project / ".kgate-cache" / "shard-timings.json"
    assert json.loads(path.read_text())["seconds"] == {"cuda:csrc/pdl.cu": 3.0, "triton:pdl:not_pdl": 1.0,
                                                       "triton:pdl:wait_first": 0.5}
    path.write_text("not json")  # unreadable: planned as if nothing were known, then rewritten
    record_timings(config, {"triton:pdl:wait_first": 0.7}, registered)
    assert json.loads(path.read_text())["seconds"] == {"triton:pdl:wait_first": 0.7}


def test_a_timings_file_nested_too_deeply_to_read_is_ignored(project: Path) -> None:
    config = load_config(project / "kgate.toml")
    path = project / ".kgate-cache" / "shard-timings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[" * 100_000)  # RecursionError in json.loads, not ValueError
    assert load_timings(config) == {}
