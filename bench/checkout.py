"""Another checkout's rag_bot in this process: a baseline measured beside this one in the same run (`--code`).

Run as modules from the repository root (`python -m bench.eval.writing`), the scripts import this checkout's
rag_bot; PYTHONPATH cannot put another one first (the root is sys.path[0]), so `--code DIR` loads DIR/rag_bot
under the name rag_bot in its place, before anything of the engine is imported.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def use_rag_bot_from(code: Path) -> ModuleType:
    """Make `import rag_bot` (and every `rag_bot.*` imported after) load from the checkout at `code`."""
    package = code.resolve() / "rag_bot"
    for name in [n for n in sys.modules if n == "rag_bot" or n.startswith("rag_bot.")]:
        del sys.modules[name]  # a module already loaded from this checkout would otherwise be reused
    spec = importlib.util.spec_from_file_location("rag_bot", package / "__init__.py",
                                                  submodule_search_locations=[str(package)])
    if spec is None or spec.loader is None:
        raise SystemExit(f"{code}: no rag_bot package there")
    module = importlib.util.module_from_spec(spec)
    sys.modules["rag_bot"] = module
    spec.loader.exec_module(module)
    return module
