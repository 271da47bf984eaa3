"""NVTX ranges in the nsroof domain: what gets pushed and popped, in which order, and what stays free."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nsroof.collectors import nvtx_ranges as nr


class RecordingDomain:
    """Stands in for the nvtx domain as a tool would see it: a log of push/pop/mark calls."""

    def __init__(self) -> None:
        self.log: list[tuple[str, ...]] = []

    def push_range(self, attributes: Any) -> None:
        self.log.append(("push", attributes))

    def pop_range(self) -> None:
        self.log.append(("pop",))

    def mark(self, attributes: Any) -> None:
        self.log.append(("mark", attributes))

    def get_event_attributes(self, message: str, *args: Any) -> Any:
        return message


@pytest.fixture
def domain(monkeypatch: pytest.MonkeyPatch) -> RecordingDomain:
    rec = RecordingDomain()
    monkeypatch.setattr(nr, "_nvtx", lambda: rec)
    monkeypatch.setattr(nr, "_attributes", lambda name: name)
    return rec


def test_context_manager_pushes_and_pops_in_the_nsroof_domain(domain: RecordingDomain) -> None:
    with nr.annotate("outer"):
        with nr.annotate("inner"):
            assert nr.current_path() == ["outer", "inner"]
    assert domain.log == [("push", "outer"), ("push", "inner"), ("pop",), ("pop",)]
    assert nr.current_path() == []


def test_decorator_opens_a_range_per_call_and_closes_it_on_error(domain: RecordingDomain) -> None:
    @nr.annotate("loss")
    def loss(x: int) -> int:
        if x < 0:
            raise ValueError("negative")
        return x * 2

    assert loss(3) == 6
    with pytest.raises(ValueError):
        loss(-1)
    assert domain.log == [("push", "loss"), ("pop",), ("push", "loss"), ("pop",)]
    assert loss.__name__ == "loss"


def test_names_with_quotes_are_refused_because_ncu_cannot_export_them() -> None:
    with pytest.raises(ValueError, match="ncu"):
        nr.annotate('say "hi"')
    with pytest.raises(ValueError):
        nr.annotate("")


def test_step_marks_and_notifies_listeners(domain: RecordingDomain) -> None:
    seen: list[int] = []
    remove = nr.add_step_listener(seen.append)
    try:
        first = nr.step()
        second = nr.step()
    finally:
        remove()
    nr.step()
    assert second == first + 1
    assert seen == [first, second]
    assert ("mark", f"step {first}") in domain.log


def test_import_has_no_side_effects() -> None:
    code = ("import sys, nsroof, nsroof.collectors.nvtx_ranges as r; "
            "print('nvtx' in sys.modules, 'torch' in sys.modules, r._domain.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False", "0"]


def test_without_a_tool_the_real_domain_is_a_no_op() -> None:
    # No NVTX injection library is loaded in tests: the nvtx package hands out its dummy domain.
    nr._domain.cache_clear()
    assert nr._is_dummy(id(nr._domain()))
    with nr.annotate("free"):
        assert nr.current_path() == ["free"]


torch = pytest.importorskip("torch")


def _model() -> Any:
    # The in-place ReLU is the case full module backward hooks cannot handle.
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(inplace=True), torch.nn.Linear(4, 2))


def test_module_ranges_nest_in_forward_and_backward(domain: RecordingDomain) -> None:
    model = _model()
    handle = nr.annotate_modules(model)
    model(torch.randn(3, 4)).sum().backward()
    handle.remove()
    pushes = [e[1] for e in domain.log if e[0] == "push"]
    assert pushes == [
        "Sequential", "Sequential.0", "Sequential.1", "Sequential.2",
        "Sequential (backward)", "Sequential.2 (backward)", "Sequential.1 (backward)",
        "Sequential.0 (backward)",
    ]
    # Balanced: every push popped, the outer backward range (input needs no grad) closed at the end of
    # backward.
    assert sum(1 for e in domain.log if e[0] == "pop") == len(pushes)
    assert nr.current_path() == []
    # Each forward range is closed before the next sibling opens.
    assert domain.log[:4] == [("push", "Sequential"), ("push", "Sequential.0"), ("pop",),
                              ("push", "Sequential.1")]


def test_module_hooks_do_nothing_when_nothing_listens() -> None:
    # No NVTX tool and no profiler: no range is opened and no backward hook is registered.
    model = _model()
    with nr.annotate_modules(model):
        out = model(torch.randn(2, 4))
        assert nr.current_path() == []
        assert not out.grad_fn.metadata  # no backward range queued on the autograd node
        out.sum().backward()
    assert nr.current_path() == []


def test_removing_the_handle_removes_every_hook(domain: RecordingDomain) -> None:
    model = _model()
    with nr.annotate_modules(model):
        model(torch.randn(2, 4))
    count = len(domain.log)
    model(torch.randn(2, 4)).sum().backward()
    assert len(domain.log) == count


def test_ranges_show_up_in_torch_profiler_as_record_functions() -> None:
    from torch.profiler import profile

    with profile() as prof:
        with nr.annotate("attention block"):
            torch.ones(4) + 1
    names = {e.name for e in prof.events() if e.is_user_annotation}
    assert "attention block" in names
    add = next(e for e in prof.events() if e.name == "aten::add")
    assert add.cpu_parent is not None and add.cpu_parent.name == "attention block"


# ---------------------------------------------------------------------- real NVTX calls, as a tool sees them


def _nvtx_include_dir() -> Path | None:
    import glob
    import os

    roots = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda", *sorted(glob.glob("/usr/local/cuda-*"))]
    for root in roots:
        if root and (Path(root) / "include" / "nvtx3" / "nvToolsExt.h").is_file():
            return Path(root) / "include"
    return None


@pytest.fixture(scope="module")
def nvtx_logger(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Compile tests/data/collectors/nvtx_logger.c, an NVTX injection library that logs what it receives."""
    import shutil

    include = _nvtx_include_dir()
    compiler = shutil.which("gcc") or shutil.which("cc")
    if include is None or compiler is None:
        pytest.skip("needs a C compiler and the NVTX v3 headers (CUDA toolkit include/nvtx3)")
    lib = tmp_path_factory.mktemp("nvtx") / "libnvtx_logger.so"
    source = data_dir / "collectors" / "nvtx_logger.c"
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", f"-I{include}", "-o", str(lib), str(source)],
                   check=True)
    return lib


def _run_with_tool(lib: Path, tmp_path: Path, code: str) -> list[str]:
    import os

    log = tmp_path / "nvtx.log"
    env = {**os.environ, "NVTX_INJECTION64_PATH": str(lib), "NSROOF_NVTX_LOG": str(log)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=Path(__file__).resolve().parents[2])
    return log.read_text().splitlines()


def test_a_tool_sees_nested_ranges_and_marks_in_the_nsroof_domain(nvtx_logger: Path, tmp_path: Path) -> None:
    code = ("import nsroof\n"
            "with nsroof.annotate('outer'):\n"
            "    with nsroof.annotate('inner'):\n"
            "        pass\n"
            "nsroof.step()\n")
    assert _run_with_tool(nvtx_logger, tmp_path, code) == [
        "domain nsroof", "push nsroof outer", "push nsroof inner", "pop nsroof", "pop nsroof",
        "mark nsroof step 1",
    ]


def test_a_tool_sees_module_ranges_forward_then_backward(nvtx_logger: Path, tmp_path: Path) -> None:
    code = ("import torch, nsroof\n"
            "m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(inplace=True), "
            "torch.nn.Linear(4, 2))\n"
            "with nsroof.annotate_modules(m):\n"
            "    m(torch.randn(3, 4)).sum().backward()\n")
    log = [line for line in _run_with_tool(nvtx_logger, tmp_path, code)
           if line.startswith(("push nsroof", "pop nsroof"))]
    pushes = [line.removeprefix("push nsroof ") for line in log if line.startswith("push")]
    assert pushes == ["Sequential", "Sequential.0", "Sequential.1", "Sequential.2", "Sequential (backward)",
                      "Sequential.2 (backward)", "Sequential.1 (backward)", "Sequential.0 (backward)"]
    # balanced at every point: never more pops than pushes, equal at the end
    depth = 0
    for line in log:
        depth += 1 if line.startswith("push") else -1
        assert depth >= 0
    assert depth == 0


def test_the_ncu_bootstrap_opens_the_run_range_around_module_ranges(nvtx_logger: Path,
                                                                    tmp_path: Path) -> None:
    # What `nsroof ncu` runs under ncu: the filter nsroof@nsroof.run (a start/end range, process-wide, so
    # autograd's backward threads are inside it) must enclose every module range, backward included.
    script = tmp_path / "train.py"
    script.write_text("import torch\nm = torch.nn.Linear(4, 2)\nm(torch.randn(3, 4)).sum().backward()\n")
    modules = tmp_path / "modules.json"
    code = ("from nsroof.collectors.ncu_run import main\n"
            f"raise SystemExit(main(['--range', 'nsroof.run', '--modules-file', {str(modules)!r}, "
            f"'--', {str(script)!r}]))\n")
    log = [line for line in _run_with_tool(nvtx_logger, tmp_path, code)
           if line.startswith(("push nsroof", "pop nsroof", "start nsroof", "end nsroof"))]
    assert log[:2] == ["start nsroof nsroof.run -> 1", "push nsroof Linear"]
    assert log[-1] == "end nsroof 1" and "push nsroof Linear (backward)" in log
    assert log.index("push nsroof Linear (backward)") < log.index("end nsroof 1")
    assert "Linear" in modules.read_text()


def test_global_module_ranges_survive_torch_compile(domain: RecordingDomain) -> None:
    # Dynamo used to trace into the global hooks and fail ("... is already tracked for mutation", a weakref
    # error); the hooks now return while Dynamo traces, and the compiled call is named as its module.
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x: Any) -> Any:
            return torch.relu(self.fc(x))

    model = Net()
    compiled = torch.compile(model, backend="eager")
    x = torch.randn(2, 4, requires_grad=True)
    with nr.annotate_all_modules(backward=True):
        compiled(x).sum().backward()
        compiled(x).sum().backward()
        model(x)  # the eager module keeps the names the compiled one had
    pushed = [entry[1] for entry in domain.log if entry[0] == "push"]
    assert "OptimizedModule" not in pushed
    assert pushed[:2] == ["Net", "Net (backward)"]  # inside the graph no hook ran: one range per call
    assert pushed[-2:] == ["Net", "Net.fc"]


def test_range_names_leave_out_the_compile_wrapper() -> None:
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    names = nr.module_range_names(torch.compile(model, backend="eager"))
    assert set(names.values()) == {"Sequential", "Sequential.0"}
    assert names["_orig_mod.0"] == "Sequential.0"


def test_the_ncu_bootstrap_runs_a_compiled_script(repo: Path, tmp_path: Path) -> None:
    # The bootstrap `nsroof ncu` runs under ncu installs the same global hooks (with backward ranges): a
    # compiled script used to fail there with rc 2. Dynamo's eager backend traces the hooks as Inductor would.
    import json
    import os

    pytest.importorskip("torch")
    modules = tmp_path / "modules.json"
    env = {**os.environ, "PYTHONPATH": str(repo), "COMPILE_BACKEND": "eager"}
    proc = subprocess.run([sys.executable, "-m", "nsroof.collectors.ncu_run", "--modules-file", str(modules),
                           "--", "python", str(repo / "tests" / "data" / "collectors" / "compiled_step.py")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "global hooks" not in proc.stderr  # torch's warning about global hooks and compile is silenced
    names = json.loads(modules.read_text())["module_ranges"]
    assert "Net" in names and "Net.block.fc1" in names
    assert not any("OptimizedModule" in n or "_orig_mod" in n for n in names)


def test_profile_sessions_leave_no_name_table_behind() -> None:
    # each session of the global hooks names the modules it sees; its names go with it, instead of one more
    # table (and a finalizer per module) kept alive by the model for every session of a long run
    import gc
    import weakref

    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(20)])

    def live_finalizers() -> int:
        gc.collect()
        # type(): no proxy asked
        return sum(1 for f in gc.get_objects() if type(f) is weakref.finalize and f.alive)

    counts = []
    for _ in range(3):
        with nr.annotate_all_modules(backward=False):
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                model(torch.randn(1, 2))
        assert "Sequential.19" in {e.name for e in prof.events()}  # the session did name the modules
        counts.append(live_finalizers())
    assert counts[0] == counts[1] == counts[2]
