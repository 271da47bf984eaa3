"""What nsroof.profile records of Inductor's kernels while it compiles (nsroof.collectors.inductor_kernels):
module paths from FX nodes' nn_module_stack, and hooks put back after the run. The recording of a real
compilation is checked end to end by tests/commands/test_profile_cli.py (one compiled run)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from nsroof.collectors import inductor_kernels as ik


class Llama:  # a stand-in class: the stack names types
    pass


class Layer:
    pass


def test_a_node_module_is_its_innermost_module_below_the_root() -> None:
    # torch.compile(step) reached the model through a local: the root entry names its class
    stack = {"L__fwd": ("L['fwd']", Llama), "L__fwd_layers_0": ("L['fwd'].layers[0]", Layer),
             "L__fwd_layers_0_mlp": ("L['fwd'].layers[0].mlp", "torch.nn.modules.container.MLP")}
    assert ik.module_of(stack) == ["Llama", "layers.0.mlp"]
    # torch.compile(model): the root is the compiled module itself, not in the stack
    assert ik.module_of({"x": ("L['self'].layers.1._orig_mod.up", Layer)}) == ["", "layers.1.up"]
    assert ik.module_of({}) == [] and ik.module_of(None) == []


def node(op: str, module: list[str]) -> dict[str, Any]:
    return {"op": op, "module": module}


def test_a_kernel_module_is_where_its_work_meets() -> None:
    # one module's ops: that module
    norm = ["", "layers.0.norm"]
    assert ik.kernel_module([node("aten::pow", norm), node("aten::mean", norm)]) == ("", "layers.0.norm")
    # a norm fused with the residual add of its layer: the layer; a view of a Linear's output is no work
    assert ik.kernel_module([node("aten::rsqrt", ["L", "layers.0.norm"]),
                             node("aten::add", ["L", "layers.0"]),
                             node("aten::view", ["L", "layers.0.attn.o"])]) == ("L", "layers.0")
    assert ik.kernel_module([node("aten::add", ["", "layers.0"]), node("aten::add", ["", "layers.1"])]
                            ) == ("", "layers")
    assert ik.kernel_module([node("aten::add", [])]) == ("", "")


def test_install_wraps_the_hooks_and_the_undo_puts_them_back(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch._inductor.codegen.wrapper as wrapper
    import torch._inductor.scheduler as scheduler

    codegen = wrapper.PythonWrapperCodegen
    before = (codegen.write_kernel_context_guard, scheduler.Scheduler.codegen_extern_call)
    recorder = ik.Recorder()
    undo = ik.install(recorder)
    try:
        assert wrapper.PythonWrapperCodegen.write_kernel_context_guard is not before[0]
        assert scheduler.Scheduler.codegen_extern_call is not before[1]
        # a record that cannot be read is counted, never raised into the compilation

        def unreadable(*_: Any) -> Any:
            raise AttributeError("no such field")

        monkeypatch.setattr(ik, "kernel_record", unreadable)
        wrapper.PythonWrapperCodegen.write_kernel_context_guard(object(), "cpp_fused_x_0", [])
        assert recorder.unreadable == 1 and recorder.kernels == {}
    finally:
        undo()
    assert (wrapper.PythonWrapperCodegen.write_kernel_context_guard,
            scheduler.Scheduler.codegen_extern_call) == before
    assert not any(type(f).__name__ == "AfterImport" for f in sys.meta_path)


def test_the_graph_caches_are_off_for_the_run_and_back_after(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    from nsroof.collectors.compile_settings import graph_caches_off

    monkeypatch.setattr(inductor_config, "fx_graph_cache", True)
    monkeypatch.setattr(functorch_config, "enable_autograd_cache", True)
    environment = dict(os.environ)
    undo = graph_caches_off()
    # a cached graph is not generated again: nothing of its kernels would be recorded
    assert (inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache) == (False, False)
    undo()
    assert (inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache) == (True, True)
    assert dict(os.environ) == environment


def test_a_config_imported_during_the_run_gets_its_caches_back_after() -> None:
    # torch reads TORCHINDUCTOR_FX_GRAPH_CACHE once, at the config's import, as a value no assignment
    # overrides: set during a run whose code imported Inductor first, it kept the caches off for good, and
    # the test above failed after such a run in the same worker (a fresh interpreter: here Inductor is
    # imported already)
    script = (
        "import sys, torch\n"
        "assert 'torch._inductor.config' not in sys.modules\n"
        "from nsroof.collectors.compile_settings import graph_caches_off\n"
        "undo = graph_caches_off()\n"
        "import torch._inductor.config as c, torch._functorch.config as f\n"
        "during = (c.fx_graph_cache, f.enable_autograd_cache)\n"
        "undo()\n"
        "print(during, (c.fx_graph_cache, f.enable_autograd_cache))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR_")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "(False, False) (True, True)"
