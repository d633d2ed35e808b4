"""Where a module sets a variable of its process's environment (kgate.collect.pyenviron), read from real source."""

from __future__ import annotations

import ast
import textwrap

from kgate.collect import pysource as py
from kgate.collect.pyenviron import Environ, environ_names


def settings(body: str, variable: str = "MY_FLAG") -> list[tuple[int, str | None]]:
    tree = ast.parse(textwrap.dedent(body))
    imports = py.import_map(tree)
    constants = py.module_constants(tree)
    environ = Environ(variable, imports, constants, environ_names(tree, imports))
    return [(getattr(at, "lineno", 0), ast.unparse(value) if value is not None else None)
            for node in ast.walk(tree) for at, value in environ.settings(node)]


def test_every_spelling_that_changes_the_process_environment() -> None:
    found = settings("""
        import os
        from unittest import mock
        KEY = "MY_FLAG"
        env = os.environ
        os.environ["MY_FLAG"] = "1"
        env[KEY] = "2"
        os.putenv("MY_FLAG", "3")
        os.environ.setdefault("MY_FLAG", "4")
        os.environ.update({"MY_FLAG": "5"})
        os.environ.update([("MY_FLAG", "6")])
        os.environ.update(MY_FLAG="7")
        os.environ |= dict(MY_FLAG="8")


        def test(monkeypatch):
            monkeypatch.setenv("MY_FLAG", "9")
            monkeypatch.setitem(os.environ, "MY_FLAG", "10")
            with mock.patch.dict(os.environ, {"MY_FLAG": "11"}):
                pass
            os.environ.setdefault("MY_FLAG")
        """)
    assert sorted(found, key=lambda item: item[0]) == [
        (6, "'1'"), (7, "'2'"), (8, "'3'"), (9, "'4'"), (10, "'5'"), (11, "'6'"), (12, "'7'"), (13, "'8'"),
        (17, "'9'"), (18, "'10'"), (19, "'11'"), (21, None)]


def test_a_copy_another_variable_or_another_mapping_is_not_a_setting() -> None:
    assert settings("""
        import os
        copy = dict(os.environ)
        copy["MY_FLAG"] = "1"
        os.environ["OTHER"] = "1"
        table = {}
        table["MY_FLAG"] = "1"
        os.environ.update({"OTHER": "1"})
        """) == []
