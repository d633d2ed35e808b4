"""Started by `kgate capture` in every Python process of the captured command (this folder is put
first on PYTHONPATH): load kgate's recorder by file path, then hand over to the environment's own
sitecustomize, if it has one, as if this one were not there."""

import importlib.machinery
import importlib.util
import os
import sys


def _load_recorder() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("_kgate_capture_runtime", os.path.join(here, "..", "runtime.py"))
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.install_from_env()


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
except Exception as exc:  # noqa: BLE001 - the command must run even when kgate's recorder cannot
    print(f"kgate: capture is off in this process: {type(exc).__name__}: {exc}", file=sys.stderr)
_chain()
