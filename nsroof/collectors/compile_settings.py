"""What nsroof.profile does about torch.compile: the Inductor settings it turns on for the run (and puts
back), the graph caches it turns off, and how its summary speaks of compile steps and of torch.compile's
wrappers.
What Inductor knew of each kernel is recorded by nsroof.collectors.inductor_kernels."""

from __future__ import annotations

import os
import sys
from typing import Any

import pandas as pd

# Inductor settings nsroof.profile turns on for the run (config attribute, its environment form for compile
# workers and for an Inductor imported later). They change only kernels compiled while they are on.
INDUCTOR_SETTINGS = (
    # each Triton kernel's launch record carries Inductor's kernel_flop and kernel_num_gb
    # (torch/_inductor/codegen/triton.py, inductor_meta), which nsroof costs the kernel by; it adds a
    # benchmark harness to the kernel files
    ("benchmark_kernel", "TORCHINDUCTOR_BENCHMARK_KERNEL"),
    # each fused C++ kernel of the CPU backend runs inside a record function of its name
    # (graph_0_cpp_fused_*), so its time is its own row instead of part of the compiled region's
    # (torch/_inductor/codegen/cpp.py)
    ("cpp.enable_kernel_profile", "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"),
)


def inductor_records_on() -> Any:
    """Turn on INDUCTOR_SETTINGS in torch._inductor.config (when imported) and in the environment. Returns the
    undo, which puts back what was there."""
    saved_env = {env: os.environ.get(env) for _, env in INDUCTOR_SETTINGS}
    config = sys.modules.get("torch._inductor.config")
    saved = {name: _config_value(config, name) for name, _ in INDUCTOR_SETTINGS} if config is not None else {}
    for name, env in INDUCTOR_SETTINGS:
        os.environ[env] = "1"
        if config is not None:
            _set_config(config, name, True)

    def undo() -> None:
        for name, env in INDUCTOR_SETTINGS:
            if saved_env[env] is None:
                os.environ.pop(env, None)
            else:
                os.environ[env] = saved_env[env]  # type: ignore[assignment]
            now = sys.modules.get("torch._inductor.config")
            if now is not None:  # imported during the run: the value its environment gave it before
                _set_config(now, name, bool(saved[name]) if config is not None else saved_env[env] == "1")
    return undo


# torch.compile's graph caches off for the run: a graph loaded from Inductor's FX graph cache or the
# AOTAutograd cache is not generated again, so nsroof.collectors.inductor_kernels would learn nothing of its
# kernels (what they fused, what they move). (config module, attribute.) Set as attributes, never through
# their environment variables (TORCHINDUCTOR_FX_GRAPH_CACHE, TORCHINDUCTOR_AUTOGRAD_CACHE): torch reads those
# once, at the config's import, as a value that overrides any later assignment, so a config first imported
# during the run would keep the caches off for the rest of the process. Both caches are looked up in the
# compiling process, never in compile workers. A user's own environment variable still wins (the graphs it
# loads from the cache then stay uncosted, with that reason). The C++/Triton code caches stay on: a kernel's
# code is still generated, only its compilation is reused (torch.compiler.config.force_disable_caches would
# turn those off too: on a 2-core machine a two-layer model's compile then took 76 s instead of 17 s).
GRAPH_CACHES = (("torch._inductor.config", "fx_graph_cache"),
                ("torch._functorch.config", "enable_autograd_cache"))


def graph_caches_off() -> Any:
    """Turn GRAPH_CACHES off, now in a config module already imported, else right after its import. Returns
    the undo, which puts back what each module said before (its default when it was imported during the
    run)."""
    from nsroof.collectors.after_import import when_imported

    before: list[tuple[Any, str, Any]] = []

    def turn_off(attr: str) -> Any:
        def off(config: Any) -> None:
            before.append((config, attr, getattr(config, attr, None)))
            setattr(config, attr, False)
        return off

    stop_waiting = when_imported({module: [turn_off(attr)] for module, attr in GRAPH_CACHES})

    def undo() -> None:
        stop_waiting()
        for config, attr, value in reversed(before):
            setattr(config, attr, value)
        before.clear()
    return undo


def _config_value(config: Any, name: str) -> Any:
    owner, _, attr = name.rpartition(".")
    return getattr(getattr(config, owner) if owner else config, attr, None)


def _set_config(config: Any, name: str, value: bool) -> None:
    owner, _, attr = name.rpartition(".")
    setattr(getattr(config, owner) if owner else config, attr, value)


def compile_note(steps_info: dict[str, Any]) -> str:
    """What the summary says of the compile steps left out (nsroof.importers.trace.inductor)."""
    left_out = int(steps_info.get("compile_rows_left_out", 0) or 0)
    if not left_out:
        return ""
    compiled = steps_info.get("compile_steps") or []
    where = (f"step{'s' if len(compiled) > 1 else ''} {', '.join(map(str, compiled))} compiled"
             if compiled else "rows inside torch.compile's compilations")
    return (f"; {where}: {left_out} rows left out as warm-up (--compile-steps keeps them)")


def wrapper_rows(report: pd.DataFrame) -> pd.Series:
    """The rows of torch.compile's wrappers' own time (nsroof.costs.ledger.aten.COMPILED_WRAPPER)."""
    from nsroof.costs.ledger.aten import COMPILED_WRAPPER_REASON

    if "missing" not in report:
        return pd.Series(False, index=report.index)
    return report["missing"].astype(str).str.contains(COMPILED_WRAPPER_REASON, regex=False)
