"""Load a generator script that lives beside what it generates (docs/configdoc.py,
docs/signals_doc.py, ...) as a module, so that tests call its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent.parent


def load_script(relative: str) -> ModuleType:
    path = ROOT / relative
    name = "script_" + relative.removesuffix(".py").replace("/", "_")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
