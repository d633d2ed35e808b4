"""Started in every Python program a kernel module's import runs while kgate records what it reads (this folder
is put first on PYTHONPATH): load kgate's recorder (`kgate.compile.import_children`), then hand over to the
environment's own sitecustomize, if it has one, as if this one were not there."""

import importlib.machinery
import importlib.util
import os
import sys


def _load_recorder() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(os.path.dirname(os.path.dirname(here)))  # the folder the kgate package is in
    sys.path.insert(0, top)
    try:
        from kgate.compile import import_children
    finally:
        sys.path.remove(top)
    import_children.start_from_env()


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


try:
    _load_recorder()
except Exception:  # noqa: BLE001 - the program runs all the same; the import that ran it is then not keyed
    os.environ.pop("KGATE_IMPORT_READS", None)
_chain()
