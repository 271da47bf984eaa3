"""Acting on a module of torch when it is imported, not before: importing Inductor takes over a second, which
a run that never compiles must not pay, yet a setting or a hook must be in place before its first use."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


def when_imported(actions: dict[str, list[Callable[[ModuleType], None]]]) -> Callable[[], None]:
    """Call each module's actions on it: now for a module already imported, else right after its first import
    (a meta path finder that wraps the module's loader). Returns the undo of the waiting only: a module
    imported later than the undo is left alone; what the actions did is the caller's to undo."""
    waiting: dict[str, list[Callable[[ModuleType], None]]] = {}
    for module_name, calls in actions.items():
        module = sys.modules.get(module_name)
        if module is not None:
            for call in calls:
                call(module)
        else:
            waiting.setdefault(module_name, []).extend(calls)

    class AfterImport(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
            if fullname not in waiting:
                return None
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            loader = getattr(spec, "loader", None)
            if spec is None or loader is None or not hasattr(loader, "exec_module"):
                return spec
            run = loader.exec_module

            def exec_module(module: ModuleType) -> None:
                run(module)
                for call in waiting.pop(fullname, []):
                    call(module)
            loader.exec_module = exec_module  # type: ignore[method-assign]
            return spec

    finder = AfterImport()
    if waiting:
        sys.meta_path.insert(0, finder)

    def stop_waiting() -> None:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
        waiting.clear()
    return stop_waiting
