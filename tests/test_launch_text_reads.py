"""The text searches and tree walks the launch-site reading (KG108, KG201) runs for every module it follows: a
launcher's local aliases found line by line, a module constant's changes found in one walk, and the assignment
expressions of a function's statements looked for only where the module spells `:=`."""

from __future__ import annotations

import ast

from kgate.collect import pyconfigs
from kgate.collect.pycallers import alias_lines, applied_aliases
from kgate.collect.pyscopes import Scope, scopes

ALIASED = """def launch(x, short, mode):
    k = decode
    k(x)
    pick = decode if short else prefill  # the short path
    pick(x)
    other = prefill if short else decode
    other(x)
    same = decode_more
    flag = x == y if short else decode
    decode = decode
    call = g(decode)
    table: object = {"d": decode,
                     "p": prefill}[mode]
    if (chosen := prefill if short else decode):
        chosen(x)
k2=decode
"""


def test_aliases_of_a_launcher_are_found_on_the_lines_that_name_it() -> None:
    # A pre-filter: `call` is bound to a value that spells the name, and the syntax tree tells it holds a call's
    # result; a name that only starts with it (`decode_more`) or the name itself rebound is none.
    assert alias_lines(ALIASED, "decode") == {"k": [1, 2], "pick": [3, 4], "other": [5, 6], "flag": [8],
                                               "call": [10], "table": [11], "chosen": [13, 14], "k2": [15]}
    assert alias_lines(ALIASED, "prefill") == {"pick": [3, 4], "other": [5, 6], "table": [12], "chosen": [13, 14]}
    # Lines ended by a carriage return and a line feed are the same lines.
    assert alias_lines(ALIASED.replace("\n", "\r\n"), "decode") == alias_lines(ALIASED, "decode")
    assert alias_lines(ALIASED.replace("\n", "\r"), "prefill") == alias_lines(ALIASED, "prefill")
    assert alias_lines(ALIASED, "absent") == {}


def test_names_bound_to_an_autograd_functions_apply_are_those_of_the_top_level() -> None:
    text = "fn = Fn.apply\n  g = Fn.apply\nh=Fn.apply # c\nk = Fn.apply(x)\nm = XFn.apply\nr = Fn.apply  # z\r\nq = Fn.apply\r\n"
    assert applied_aliases(text, "Fn") == ["fn", "h", "r"]
    assert applied_aliases(text, "Other") == []


def _changed(text: str) -> bool:
    return pyconfigs._changed("CONFIGS", ast.parse(text))


def test_a_module_constant_is_changed_by_what_any_function_nested_or_not_binds() -> None:
    head = "CONFIGS = [triton.Config({})]\n"
    assert not _changed(head + "def f():\n    return CONFIGS\n")
    assert not _changed(head + "class C:\n    CONFIGS = []\n")
    assert _changed(head + "def f():\n    def g():\n        def h():\n            CONFIGS = []\n")
    assert _changed(head + "def f():\n    for CONFIGS in x:\n        pass\n")
    assert _changed(head + "key = lambda CONFIGS: CONFIGS\n")
    assert _changed(head + "def f(a, *, CONFIGS=None):\n    pass\n")
    assert _changed(head + "class C:\n    def m(self):\n        CONFIGS = 1\n")
    assert _changed(head + "CONFIGS.append(1)\n")
    assert _changed(head + "def f():\n    global CONFIGS\n")


def test_an_assignment_expression_binds_in_a_function_only_where_the_module_spells_it() -> None:
    tree = ast.parse("def launch(x):\n    if (n := x.shape[0]) > 0:\n        k[(1,)](x, n)\n")
    (named,) = [s for s in scopes(tree, named=True)]
    assert [type(v).__name__ for v, _p, _c in named.env["n"]] == ["Subscript"]
    assert Scope(tree.body[0], None).named  # not told: read as if it may
    bare = ast.parse("def launch(x):\n    n = x.shape[0]\n    k[(1,)](x, n)\n")
    (plain,) = list(scopes(bare, named=False))
    assert not plain.named and set(plain.env) == {"n"}


def test_a_texts_lines_are_those_python_numbers() -> None:
    from kgate.collect.source import split_lines

    assert split_lines("a\nb\n") == ["a", "b", ""]
    assert split_lines("a\r\nb\rc\nd") == ["a", "b", "c", "d"]
    assert split_lines("") == [""]
    assert split_lines("x\x0cy\x0bz\n") == ["x\x0cy\x0bz", ""]  # a form feed or vertical tab ends no line
