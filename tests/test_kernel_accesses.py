"""What a kernel does through its pointers (kgate.collect.pyaccess) and where a call runs in its body
(kgate.collect.pyguards), read from real kernel source."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from kgate.collect import pysource as py
from kgate.collect.pyaccess import Access, KernelModule, repeats_differently, written_first
from kgate.collect.pyguards import before, guards, truth
from kgate.collect.source import SourceFile

HEADER = "import triton\nimport triton.language as tl\n\n\n"


def module(tmp_path: Path, body: str, header: str = HEADER) -> KernelModule:
    path = tmp_path / "kernels.py"
    path.write_text(header + textwrap.dedent(body))
    source = SourceFile(str(path), path.name, path.read_bytes())
    return KernelModule(source, py.info(source))


def kernel(found: KernelModule, name: str = "kernel") -> py.Function:
    fn = found.function(name)
    assert fn is not None
    return fn


def shapes(accesses: list[Access]) -> list[tuple[str, str, tuple[str, ...], bool]]:
    return [(a.op, a.helper, a.roots, a.used) for a in accesses]


def test_a_pointer_is_traced_to_its_parameter_through_locals_and_moves(tmp_path: Path) -> None:
    found = module(tmp_path, """
        @triton.jit
        def kernel(a, c, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            ptrs = c + offs
            ptrs += n
            x = tl.load(a + offs)
            tl.atomic_add(ptrs, x)
            tl.atomic_add(tl.multiple_of(c, 16), x)
            (c + offs).atomic_max(x)
            tl.atomic_add(n * 2, x)
        """)
    fn = kernel(found)
    assert shapes(list(found.accesses(fn))) == [
        ("atomic_add", "", ("c",), False), ("atomic_add", "", ("c",), False), ("atomic_max", "", ("c",), False),
        ("atomic_add", "", (), False)]  # a product is never a pointer
    assert shapes(list(found.accesses(fn, memory=True)))[0] == ("load", "", ("a",), True)


def test_an_atomic_in_a_helper_is_mapped_onto_what_the_kernel_passes(tmp_path: Path) -> None:
    found = module(tmp_path, """
        @triton.jit
        def _accumulate(target, value):
            tl.atomic_add(target, value)


        @triton.jit
        def _outer(p, v):
            _accumulate(p + 1, v)


        @triton.jit
        def _reads(p):
            return tl.load(p)


        @triton.jit
        def kernel(out, x):
            _outer(out, x)
            _reads(x)
        """)
    fn = kernel(found)
    assert shapes(list(found.accesses(fn))) == [("atomic_add", "_accumulate", ("out",), False)]
    assert found.writers == {"_accumulate", "_outer", "kernel"}  # `_reads` writes nothing: never walked


def test_the_old_value_an_atomic_returns_is_used_or_dropped(tmp_path: Path) -> None:
    found = module(tmp_path, """
        @triton.jit
        def kernel(lock, flag, count):
            if tl.atomic_cas(lock, 0, 1) == 0:
                pass
            was = tl.atomic_xchg(flag, 1)
            tl.device_assert(was == 0)
            unused = tl.atomic_add(count, 1)
        """)
    assert shapes(list(found.accesses(kernel(found)))) == [
        ("atomic_cas", "", ("lock",), True), ("atomic_xchg", "", ("flag",), True),
        ("atomic_add", "", ("count",), False)]


def test_a_gluon_kernel_names_its_atomics_by_gluon(tmp_path: Path) -> None:
    found = module(tmp_path, """
        from triton.experimental import gluon
        from triton.experimental.gluon import language as gl


        @gluon.jit
        def kernel(out):
            gl.atomic_add(out, 1)
        """)
    [access] = found.accesses(kernel(found))
    assert access.describe == "gl.atomic_add" and access.roots == ("out",)


def test_whether_a_second_run_leaves_another_result(tmp_path: Path) -> None:
    found = module(tmp_path, """
        @triton.jit
        def kernel(amax, best, lock, slot, x):
            tl.atomic_max(amax, x)
            tl.atomic_max(best, x)
            y = tl.load(best)
            tl.atomic_cas(lock, 0, 1)
            t = tl.load(lock)
            tl.atomic_xchg(lock, 0)
            if tl.atomic_cas(slot, 0, 1) == 0:
                pass
        """)
    fn = kernel(found)
    memory = list(found.accesses(fn, memory=True))
    atomics = [a for a in memory if a.op.startswith("atomic_")]
    verdicts = {(a.op, a.roots[0]): repeats_differently(a, a.roots[0], memory) for a in atomics}
    assert verdicts == {("atomic_max", "amax"): False,  # an extremum nobody reads back
                        ("atomic_max", "best"): True,  # read back: the next run sees the last one's maximum
                        ("atomic_cas", "lock"): False, ("atomic_xchg", "lock"): False,  # a lock taken and released
                        ("atomic_cas", "slot"): True}  # a slot claimed once and never released


def test_a_store_through_the_same_address_first_covers_the_add(tmp_path: Path) -> None:
    found = module(tmp_path, """
        @triton.jit
        def kernel(d, row, offs, x, flag):
            tl.store(d + row + offs, x)
            tl.atomic_add(d + row, x)


        @triton.jit
        def guarded(d, row, x, flag):
            if flag:
                tl.store(d + row, x)
            tl.atomic_add(d + row, x)


        @triton.jit
        def moved(d, x, n):
            ptrs = d + 1
            tl.store(ptrs, x)
            ptrs = d + n
            tl.atomic_add(ptrs, x)
        """)
    verdicts = {}
    for name in ("kernel", "guarded", "moved"):
        fn = kernel(found, name)
        memory = list(found.accesses(fn, memory=True))
        stores = [a for a in memory if a.op == "store"]
        [add] = [a for a in memory if a.op == "atomic_add"]
        verdicts[name] = written_first(fn, add, stores)
    assert verdicts == {"kernel": True, "guarded": False, "moved": False}


def _calls(fn: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == name]


def test_the_ifs_around_a_call_and_their_value_under_constexprs(tmp_path: Path) -> None:
    found = module(tmp_path, """
        @triton.jit
        def kernel(c, x, SPLIT_K: tl.constexpr, EVEN: tl.constexpr):
            for i in range(4):
                tl.store(c, x)
            if SPLIT_K == 1:
                tl.store(c, x)
            else:
                if not EVEN:
                    tl.atomic_add(c, x)
        """)
    fn = kernel(found)
    [add] = _calls(fn, "atomic_add")
    first, second = [ast.unparse(test) for test, _taken in guards(fn.body, add)]
    assert (first, second) == ("SPLIT_K == 1", "not EVEN")
    assert [taken for _test, taken in guards(fn.body, add)] == [False, True]
    test = guards(fn.body, add)[0][0]
    assert (truth(test, {"SPLIT_K": 1}), truth(test, {"SPLIT_K": 4}), truth(test, {})) == (True, False, None)
    in_loop, in_branch = _calls(fn, "store")
    assert before(fn.body, in_loop, add) and not before(fn.body, in_branch, add)
