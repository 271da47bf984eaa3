"""Names of nn.Module ranges (nsroof.collectors.nvtx_ranges): qualified by their path below a root named by
its class, torch.compile's wrapper named as the module it wraps; and the name table of the global hooks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def original(module: Any) -> Any:
    """The module torch.compile wrapped (``OptimizedModule._orig_mod``), else the module itself."""
    if type(module).__name__ != "OptimizedModule":
        return module
    inner = module._modules.get("_orig_mod")
    return module if inner is None else inner


def range_name(root_name: str, qual: str) -> str:
    # torch.compile puts the original module below its wrapper as `_orig_mod`: the path leaves that step
    # out, so a compiled region and the modules in it keep the names the eager model has.
    parts = [p for p in qual.split(".") if p != "_orig_mod"] if qual else []
    return ".".join([root_name, *parts])


class GlobalNames:
    """Qualified names for modules seen by the global hooks: a module first seen without a known parent is
    a root named by its class; its children are named by their path below it (as FlopCounterMode does).
    Keyed by id() for a cheap lookup on every module call; an entry goes when its module is collected."""

    def __init__(self, on_new_name: Callable[[str], None]) -> None:
        self.names: dict[int, str] = {}
        self.on_new_name = on_new_name  # told each name given out (the module range names)
        self._finalizers: list[Any] = []

    def of(self, module: Any) -> str:
        name = self.names.get(id(module))
        if name is None:
            inner = original(module)
            known = self.names.get(id(inner)) if inner is not module else None
            if known is not None:
                self._add(module, known)  # compiled after its first eager call: the same path
            root = type(inner).__name__
            for qual, child in module.named_modules():
                if id(child) not in self.names:
                    self._add(child, range_name(root, qual))
            name = self.names[id(module)]
        return name

    def _add(self, module: Any, name: str) -> None:
        import weakref

        key = id(module)
        self.names[key] = name
        self._finalizers.append(weakref.finalize(module, self.names.pop, key, None))
        self.on_new_name(name)

    def remove(self) -> None:
        """Forget every name: the entries' finalizers detached from their modules, which would otherwise
        keep this table alive as long as the model (one more table per profile session of a long run)."""
        for finalizer in self._finalizers:
            finalizer.detach()
        self._finalizers.clear()
        self.names.clear()


class quiet_compile_warning:  # noqa: N801 - a handle like the hooks': .remove() undoes it
    """Silences torch's warning that global hooks also fire for torch.compile's OptimizedModule while the
    hooks are installed: nsroof names the wrapper as the module it wraps (see original)."""

    def __init__(self) -> None:
        import warnings

        self._saved: Any = warnings.catch_warnings()
        self._saved.__enter__()
        warnings.filterwarnings("ignore",
                                message=r"Using `torch\.compile\(module\)` when there are global hooks")

    def remove(self) -> None:
        if self._saved is not None:
            self._saved.__exit__(None, None, None)
            self._saved = None
