"""The NVTX backend without the nvtx package (as on a GPU image that has torch but not `nvtx`): nsroof's
ranges go through torch.cuda.nvtx, in the default domain; the backend in use is said, and the ncu
bootstrap checks its range reaches a tool. Each case runs in a fresh interpreter whose `import nvtx` fails
(sys.modules['nvtx'] = None). torch here is a CPU build, whose torch.cuda.nvtx is a stub that raises;
a CUDA build's bindings are stood in for by a recorder answering as NVTX v3 does: the new depth (>= 0)
from a push when a tool is attached, a negative value when none is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from tests._paths import REPO

PRELUDE = '''
import sys
sys.modules["nvtx"] = None  # the nvtx package is absent: `import nvtx` raises ImportError
import torch, torch.cuda.nvtx

class Bindings:  # torch._C._nvtx of a CUDA build, as a tool sees it
    def __init__(self, tool):
        self.tool, self.log, self.depth, self.next_id = tool, [], 0, 0
    def rangePushA(self, msg):
        self.log.append(("push", msg)); self.depth += 1
        return self.depth - 1 if self.tool else -2
    def rangePop(self):
        self.log.append(("pop",)); self.depth -= 1
        return self.depth if self.tool else -2
    def rangeStartA(self, msg):
        self.next_id += 1; self.log.append(("start", msg, self.next_id)); return self.next_id
    def rangeEnd(self, rid):
        self.log.append(("end", rid))
    def markA(self, msg):
        self.log.append(("mark", msg))

FAKE = None
def install(tool):
    global FAKE
    FAKE = Bindings(tool)
    torch.cuda.nvtx._nvtx = FAKE
'''


def _run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("NSROOF_NVTX_BACKEND", "NVTX_INJECTION64_PATH")}
    full_env.update(PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True, text=True,
                          env=full_env, timeout=120, cwd=REPO)


def test_without_nvtx_the_ranges_go_through_torch_cuda_nvtx() -> None:
    code = '''
install(tool=True)
import nsroof
from nsroof.collectors import nvtx_ranges as nr
print(nr.backend())
with nsroof.annotate("outer"):
    with nsroof.annotate("inner"):
        pass
with nr.process_range("nsroof.run"):
    pass
nsroof.step()
print(FAKE.log)
'''
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    backend, log = proc.stdout.splitlines()
    assert backend == "('torch.cuda.nvtx', True)"
    # the probe push/pop that found the tool, then the ranges as a tool sees them
    assert eval(log) == [("push", "nsroof.probe"), ("pop",), ("push", "outer"), ("push", "inner"), ("pop",),
                         ("pop",), ("start", "nsroof.run", 1), ("end", 1), ("mark", "step 1")]


def test_without_a_tool_torch_cuda_nvtx_ranges_cost_nothing() -> None:
    code = '''
install(tool=False)
import nsroof
from nsroof.collectors import nvtx_ranges as nr
print(nr.backend())
with nsroof.annotate("free"):
    pass
print(FAKE.log)
'''
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    backend, log = proc.stdout.splitlines()
    assert backend == "('torch.cuda.nvtx', False)"
    assert eval(log) == [("push", "nsroof.probe")]  # the probe only: no tool, so no range is pushed


def test_a_cpu_torch_without_nvtx_has_no_backend_and_a_forced_one_is_an_error() -> None:
    proc = _run("from nsroof.collectors import nvtx_ranges as nr\nprint(nr.backend())\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "('none', False)"  # the CPU build's stub is not a backend
    for forced, message in (("nvtx", "NSROOF_NVTX_BACKEND=nvtx but the nvtx package is not installed"),
                            ("torch", "NSROOF_NVTX_BACKEND=torch but torch.cuda.nvtx is not usable here")):
        proc = _run("from nsroof.collectors import nvtx_ranges as nr\nnr.backend()\n",
                    {"NSROOF_NVTX_BACKEND": forced})
        assert proc.returncode != 0 and message in proc.stderr


SCRIPT = '''import torch
p = torch.nn.Parameter(torch.ones(2))
opt = torch.optim.SGD([p], lr=0.1)
for _ in range(3):
    p.sum().backward()
    opt.step()
'''


def test_the_ncu_bootstrap_opens_one_step_in_the_default_domain(tmp_path: Path) -> None:
    """--after-steps 1 over three optimizer steps: the start/end range opens at the end of step 1 and ends
    at the end of step 2; the state file says which backend ran and that the range opened."""
    script, state = tmp_path / "train.py", tmp_path / "state.json"
    script.write_text(SCRIPT)
    code = f'''
install(tool=True)
from nsroof.collectors.ncu_run import main
rc = main(["--range", "nsroof.step", "--modules-file", {str(state)!r}, "--after-steps", "1",
           "--", {str(script)!r}])
print([e for e in FAKE.log if e[0] in ("start", "end")])
raise SystemExit(rc)
'''
    proc = _run(code, {"NSROOF_NVTX_BACKEND": "torch", "NVTX_INJECTION64_PATH": "/a/tool.so"})
    assert proc.returncode == 0, proc.stderr
    assert "nsroof: NVTX backend torch.cuda.nvtx (default domain); a tool is listening" in proc.stderr
    assert eval(proc.stdout.strip()) == [("start", "nsroof.step", 1), ("end", 1)]
    facts = json.loads(state.read_text())
    assert ((facts["nvtx_backend"], facts["nvtx_listening"], facts["range_opened"])
            == ("torch.cuda.nvtx", True, True))
    assert (facts["steps_marked"], facts["step_source"]) == (3, "optimizer")


def test_under_a_tool_a_range_that_cannot_reach_it_stops_before_the_script(repo: Path,
                                                                           tmp_path: Path) -> None:
    script, state = tmp_path / "train.py", tmp_path / "state.json"
    script.write_text("open('ran', 'w').write('yes')\n")
    code = f'''
install(tool=False)
from nsroof.collectors.ncu_run import main
raise SystemExit(main(["--range", "nsroof.run", "--modules-file", {str(state)!r}, "--", {str(script)!r}]))
'''
    proc = _run(code, {"NVTX_INJECTION64_PATH": "/a/tool.so"})
    assert proc.returncode == 2
    assert "cannot reach the profiler: backend torch.cuda.nvtx has no tool listening" in proc.stderr
    assert not (repo / "ran").exists()
    assert "cannot reach the profiler" in json.loads(state.read_text())["error"]
