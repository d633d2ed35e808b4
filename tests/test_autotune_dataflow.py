"""Following an autotuner's configs and reset lists through a module (kgate.collect.pyconfigs,
kgate.collect.pyresets), read from real source."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from kgate.collect import pyautotune
from kgate.collect import pysource as py
from kgate.collect.pyaccess import KernelModule
from kgate.collect.pyconfigs import Config, Partial, Tuning, hooks_reset, reaching
from kgate.collect.pyresets import protected
from kgate.collect.source import SourceFile

HEADER = "import triton\nimport triton.language as tl\n\n\n"


def parsed(tmp_path: Path, body: str) -> tuple[SourceFile, py.ParsedModule]:
    path = tmp_path / "kernels.py"
    path.write_text(HEADER + textwrap.dedent(body))
    source = SourceFile(str(path), path.name, path.read_bytes())
    return source, py.ParsedModule(source.tree, origin=source)


def tuning(tmp_path: Path, body: str) -> tuple[Tuning, KernelModule]:
    source, info = parsed(tmp_path, body)
    found = KernelModule(source, info)
    return Tuning(found), found


def configs_of(tmp_path: Path, body: str, expr: str = "CONFIGS") -> list[Config] | None:
    tune, _ = tuning(tmp_path, body)
    return tune.configs(ast.parse(expr, mode="eval").body)


def test_configs_are_followed_through_constants_sums_comprehensions_and_builders(tmp_path: Path) -> None:
    found = configs_of(tmp_path, """
        def init_to_zero(*names):
            def hook(nargs):
                for name in names:
                    nargs[name].zero_()
            return hook


        def build(pre_hook=None):
            return [triton.Config({"BLOCK": b, "SPLIT_K": 4}, pre_hook=pre_hook) for b in [64, 128]]


        BASE = [triton.Config({"SPLIT_K": s}) for s in [1]]
        CONFIGS = BASE + build(pre_hook=init_to_zero("c")) + [triton.Config({"SPLIT_K": 2}, pre_hook=lambda a: 0)]
        """)
    assert found is not None and not isinstance(found, Partial)
    assert [(c.values, c.resets) for c in found] == [
        ({"SPLIT_K": 1}, frozenset()),
        ({"SPLIT_K": 4}, frozenset({"c"})),  # `b` takes two values: not known
        ({"SPLIT_K": 2}, frozenset())]


def test_a_list_partly_built_elsewhere_is_partial_and_one_wholly_elsewhere_unreadable(tmp_path: Path) -> None:
    body = """
        from .shared import OTHER
        OWN = [triton.Config({"SPLIT_K": 1})]
        """
    partly = configs_of(tmp_path, body, "OWN + OTHER")
    assert isinstance(partly, Partial) and [c.values for c in partly] == [{"SPLIT_K": 1}]
    assert configs_of(tmp_path, body, "OTHER") is None


def test_a_pruner_that_builds_its_own_configs_replaces_the_list(tmp_path: Path) -> None:
    tune, _ = tuning(tmp_path, """
        def own(configs, named_args, **kwargs):
            for config in configs:
                yield triton.Config({"SPLIT_K": 1})


        def some(configs, named_args, **kwargs):
            extra = [triton.Config({"SPLIT_K": 8})]
            return configs[:1] + extra


        def as_a_list(configs, named_args, **kwargs):
            return [triton.Config({"SPLIT_K": 2}) for c in configs]


        def passed_on(configs, named_args, **kwargs):
            yield triton.Config({"SPLIT_K": 16})
            yield from configs
        """)
    given = [Config({"SPLIT_K": 4}, frozenset())]

    def prune(pruner: str) -> list[dict[str, object]]:
        by = ast.parse(f'{{"early_config_prune": {pruner}}}', mode="eval").body
        found = tune.pruned(by, given)
        assert found is not None
        return [c.values for c in found]

    assert prune("own") == [{"SPLIT_K": 1}]
    assert prune("some") == [{"SPLIT_K": 4}, {"SPLIT_K": 8}]
    assert prune("as_a_list") == [{"SPLIT_K": 2}]  # a list of its own configs only
    assert prune("passed_on") == [{"SPLIT_K": 4}, {"SPLIT_K": 16}]  # `yield from configs` passes the given on
    assert prune("imported_pruner") == [{"SPLIT_K": 4}]  # one kgate cannot read leaves the list as it is


def test_hooks_are_read_when_written_here_and_trusted_otherwise(tmp_path: Path) -> None:
    tune, _ = tuning(tmp_path, """
        from .hooks import imported_hook

        def zero_c(nargs):
            nargs["c"].zero_()


        def init_to_zero(names):
            return lambda nargs: [nargs[n].zero_() for n in names]
        """)

    def resets(hook: str) -> frozenset[str] | None:
        return tune.resets(ast.parse(hook, mode="eval").body)

    assert resets("zero_c") == frozenset({"c"})
    assert resets('init_to_zero(["dq", "dk"])') == frozenset({"dq", "dk"})
    assert resets("zero_c if split_k > 1 else None") == frozenset({"c"})
    assert resets("None") == frozenset()
    assert resets("imported_hook") is None


def test_a_heuristic_that_fixes_a_constexpr_decides_which_configs_reach_an_atomic(tmp_path: Path) -> None:
    tune, found = tuning(tmp_path, """
        def one(args):
            return 1


        @triton.heuristics({"SPLIT_K": lambda args: 1, "EVEN": one, "BLOCK": lambda args: args["n"]})
        @triton.jit
        def kernel(c, x, SPLIT_K: tl.constexpr, EVEN: tl.constexpr, BLOCK: tl.constexpr):
            if BLOCK == 64:
                tl.store(c, x)
            else:
                tl.atomic_add(c, x)
        """)
    fn = found.function("kernel")
    assert fn is not None
    assert tune.fixed(fn) == {"SPLIT_K": 1, "EVEN": 1}
    [add] = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "atomic_add"]
    small, large = Config({"BLOCK": 64}, frozenset()), Config({"BLOCK": 128}, None)
    assert reaching(fn, add, [small, large], {}) == [large]
    assert hooks_reset([large], "c")  # a hook kgate cannot read is trusted
    assert not hooks_reset([small], "c") and not hooks_reset(None, "c")


def _bound(tmp_path: Path, body: str, name: str) -> pyautotune.Bound:
    source, info = parsed(tmp_path, body)
    [application] = pyautotune.Applications(info, source.path, None).find()
    return application.arguments[name]


def test_a_reset_list_is_followed_on_every_path_to_the_call(tmp_path: Path) -> None:
    body = """
        @triton.jit
        def bwd(dq, dk, N):
            tl.atomic_add(dq, 1)


        def launch(varlen, deterministic):
            restore = ()
            if varlen:
                restore = ("dq", "dk")
            else:
                restore = ("dk",)
            if deterministic:
                restore = None
            if restore is None:
                restore = ["dk"]
            tuned = triton.autotune(configs=[], key=["N"], restore_value=restore)(bwd)
        """
    always, sometimes = protected(_bound(tmp_path, body, "restore_value"), {}) or (None, None)
    assert always == {"dk"} and sometimes == {"dq": "varlen and not deterministic"}


def test_a_list_built_otherwise_is_unreadable_and_a_literal_is_read_as_is(tmp_path: Path) -> None:
    body = """
        @triton.jit
        def bwd(dq, N):
            tl.atomic_add(dq, 1)


        def launch(names):
            restore = list(names)
            triton.autotune(configs=[], key=["N"], restore_value=restore, reset_to_zero=["dq"])(bwd)
        """
    assert protected(_bound(tmp_path, body, "restore_value"), {}) is None
    assert protected(_bound(tmp_path, body, "reset_to_zero"), {}) == ({"dq"}, {})
    assert protected(None, {}) == (set(), {})
