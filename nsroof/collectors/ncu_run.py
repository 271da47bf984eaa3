"""`nsroof ncu`: run a PyTorch script under Nsight Compute with the counters the hierarchical roofline needs,
export the result and analyze it, kernels joined to ops and modules through their NVTX stack.

The profiling command (``ncu_command``):

    LC_ALL=C NSROOF_NVTX_BACKEND=<nvtx|torch> ncu --nvtx --nvtx-include <filter> [-k …] [-c N] [-s N]
        [--replay-mode …] [--target-processes …] [--clock-control …] [--set …] [--ncu-args words]
        --metrics <required_metrics(cc, set)> --print-units base -o <out>.ncu-rep -f --log-file <out>.log
        <python> -m nsroof.collectors.ncu_run --range <range> --modules-file <out>.modules.json
        [--after-steps W | --user-range] -- script.py args…

What is profiled (the range, ncu's selection options, NCCL left out, the NVTX domain) is
nsroof.collectors.ncu_select's ``Selection``: by default one step after warm-up. The filter is a start/end
range (``ncu --help``: ``--nvtx-include "Domain A@Range A"`` profiles kernels inside start/end range
'Range A' of 'Domain A'; ``"Range A"`` the same in the default domain). A start/end range is
process-wide: kernels launched from autograd's backward threads and the optimizer are inside it, where a
push/pop range (``nsroof@<range>/``) holds only its own thread's kernels and would profile no backward kernel.

The script runs through a small bootstrap (``main`` below, in the profiled process): it says which NVTX
backend is in use and checks a tool listens to it (under ncu a range that cannot reach it is an error
before the script runs), ranges every nn.Module forward and backward, turns on torch's emit_nvtx
(record_shapes) when CUDA is there, so each kernel's default-domain stack ends in the aten op that
launched it, opens the range (at the step boundaries, around the whole script, or through the script's
own ``nsroof.annotate(NAME)``), and writes what it did (module range names, backend, steps marked) to
<out>.modules.json, so the join can tell module ranges from other ranges and an empty run is explained.

``nsroof ncu --dry-run`` prints these commands and an estimate of the profiling time, and runs nothing
(``dry_run``): on clusters people wrap the ncu line in srun/mpirun themselves.

Export: ``LC_ALL=C ncu -i <out>.ncu-rep --csv --page raw --print-units base`` into <out>.csv; then
nsroof.pipeline.analyze and ``join_nvtx`` fill the report's op, input_shapes and module columns; the
report's metadata records the selection, the clock control and what ncu's log says it profiled.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsroof.collectors.ncu_select import (
    FIRST_KERNELS,
    NSROOF_SETS,
    RUN_RANGE,
    Selection,
    check_range_name,
    estimate,
    log_facts,
    nvtx_backend_of,
)
from nsroof.errors import NsroofError, ToolNotFoundError

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_RANGE = RUN_RANGE
__all__ = ["Selection", "check_range_name", "dry_run", "run"]
DOMAIN = "nsroof"
NCU_HINT = ("install the Nsight Compute CLI (it ships with the CUDA toolkit, or from "
            "https://developer.nvidia.com/nsight-compute) and put the folder holding `ncu` on PATH, "
            "or set NSROOF_NCU to its path")

# emit_nvtx range names: "<op>[, seq = N], op_id = K[, sizes = [[…], …][, input_op_ids = …]]"
_OP_RANGE = re.compile(r"^(?P<op>[^,]+?)(?:, seq = \d+)?, op_id = \d+(?:, sizes = (?P<sizes>\[.*?\]))?"
                       r"(?:, input_op_ids = .*)?$")


@dataclass(frozen=True)
class Outputs:
    """Files one `nsroof ncu` run writes, all from one base path."""

    base: Path

    @property
    def report(self) -> Path:
        return self.base.with_name(self.base.name + ".ncu-rep")

    @property
    def log(self) -> Path:
        return self.base.with_name(self.base.name + ".log")

    @property
    def csv(self) -> Path:
        return self.base.with_name(self.base.name + ".csv")

    @property
    def modules(self) -> Path:
        return self.base.with_name(self.base.name + ".modules.json")

    @property
    def parquet(self) -> Path:
        return self.base.with_name(self.base.name + ".parquet")


def outputs_for(output: str | os.PathLike[str]) -> Outputs:
    """`-o run` or `-o run.ncu-rep` -> run.ncu-rep, run.log, run.csv, run.parquet."""
    p = Path(output)
    name = p.name.removesuffix(".ncu-rep").removesuffix(".parquet")
    return Outputs(p.with_name(name))


def find_ncu() -> str:
    explicit = os.environ.get("NSROOF_NCU")
    if explicit:
        if Path(explicit).is_file() and os.access(explicit, os.X_OK):
            return explicit
        raise ToolNotFoundError(f"NSROOF_NCU={explicit} is not an executable file — {NCU_HINT}")
    found = shutil.which("ncu")
    if found is None:
        raise ToolNotFoundError(f"ncu (Nsight Compute) not found on PATH — {NCU_HINT}")
    return found


def device_cc() -> str | None:
    """Compute capability of the local CUDA device ('9.0'), or None when torch or CUDA is absent."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}"


def split_python(command: Sequence[str]) -> tuple[str, list[str]]:
    """(python executable, the rest) of `python train.py args` or `train.py args`."""
    words = list(command)
    if not words:
        raise NsroofError("no command to profile: nsroof ncu -- python train.py [args]")
    if Path(words[0]).name.startswith("python"):
        return words[0], words[1:]
    return sys.executable, words


def ncu_command(
    ncu: str,
    command: Sequence[str],
    out: Outputs,
    *,
    metrics: Sequence[str],
    selection: Selection | None = None,
) -> list[str]:
    """ncu [NVTX filter, ncu's selection options] --metrics … -o … -- <python> -m nsroof.collectors.ncu_run
    [the range to open] -- script args: ncu's options before the application, the script's after it."""
    sel = selection or Selection()
    python, rest = split_python(command)
    if not rest:
        raise NsroofError("no script to profile after the python executable")
    how = {"range": ["--user-range"], "step": ["--after-steps", str(sel.warmup_steps)], "run": []}[sel.mode]
    bootstrap = [python, "-m", "nsroof.collectors.ncu_run", "--range", sel.range_name,
                 "--modules-file", str(out.modules), *how, "--", *rest]
    return [
        ncu,
        *sel.ncu_options(),
        "--metrics", ",".join(metrics),
        "--print-units", "base",
        "-o", str(out.report),
        "-f",
        "--log-file", str(out.log),
        *bootstrap,
    ]


def nvtx_filter(range_name: str) -> str:
    """ncu's start/end range filter for the nsroof domain's `range_name` (see the module docstring)."""
    return Selection(range_name=range_name).nvtx_filter()


def resolve_backend(selection: Selection, command: Sequence[str]) -> Selection:
    """The selection with the NVTX backend the profiled interpreter will use (its domain is the filter's)."""
    python, _rest = split_python(command)
    return replace(selection, nvtx_backend=nvtx_backend_of(python, _env()))


def dry_run(command: Sequence[str], output: str | os.PathLike[str], *, selection: Selection | None = None,
            metric_set: str = "roofline") -> str:
    """The exact commands `nsroof ncu` would run (profile, export, analyze), one per line, shell-quoted,
    with an estimate of the profiling time; nothing runs. Without a local ncu the executable is written
    `ncu` (resolved where it will run)."""
    import shlex

    from nsroof.counters.metric_formulas import required_metrics

    try:
        ncu = find_ncu()
    except ToolNotFoundError:
        ncu = "ncu"
    out = outputs_for(output)
    sel = resolve_backend(selection or Selection(), command)
    metrics = required_metrics(device_cc(), _metric_list(metric_set))
    cmd = ncu_command(ncu, command, out, metrics=metrics, selection=sel)
    env = _env(sel)
    prefix = (f"LC_ALL=C NSROOF_NVTX_BACKEND={sel.nvtx_backend} PYTHONPATH={shlex.quote(env['PYTHONPATH'])} ")
    return "\n".join([
        "# 1. profile (wrap this line in srun/mpirun as your cluster needs)",
        f"# {estimate(sel, len(metrics))}",
        prefix + shlex.join(cmd),
        "# 2. export the raw page",
        prefix + shlex.join(export_command(ncu, out)) + " > " + shlex.quote(str(out.csv)),
        "# 3. analyze: the export joined to ops and modules through the NVTX stack, written to the report",
        shlex.join(["python", "-m", "nsroof.collectors.ncu_run", "--analyze", str(out.base)]),
    ])


def _metric_list(metric_set: str) -> str:
    """nsroof's metric list for `--set`: its own sets by name; an ncu section set adds to the roofline
    list."""
    return metric_set if metric_set in NSROOF_SETS else "roofline"


def export_command(ncu: str, out: Outputs) -> list[str]:
    return [ncu, "-i", str(out.report), "--csv", "--page", "raw", "--print-units", "base"]


def _env(selection: Selection | None = None) -> dict[str, str]:
    # ncu prints numbers in the locale of its process: C gives no grouping and '.' decimals.
    env = {**os.environ, "LC_ALL": "C"}
    repo_root = str(Path(__file__).resolve().parents[2])
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != repo_root]
    env["PYTHONPATH"] = os.pathsep.join([repo_root, *rest])
    if selection is not None:
        env["NSROOF_NVTX_BACKEND"] = selection.nvtx_backend  # the domain the filter names
    return env


def run(
    command: Sequence[str],
    output: str | os.PathLike[str],
    *,
    selection: Selection | None = None,
    metric_set: str = "roofline",
    machine: Any = None,
    say: Any = None,
) -> tuple[Any, Outputs, list[str]]:
    """Profile, export, analyze. Returns (Report, Outputs, the ncu command that ran). In step mode a
    script that marked no step is profiled again, its first FIRST_KERNELS kernels (`say` is told)."""
    import time

    from nsroof.counters.metric_formulas import required_metrics

    ncu = find_ncu()
    out = outputs_for(output)
    out.base.parent.mkdir(parents=True, exist_ok=True)
    sel = resolve_backend(selection or Selection(), command)
    metrics = required_metrics(device_cc(), _metric_list(metric_set))
    t0 = time.perf_counter()
    cmd = _profile(ncu, command, out, metrics, sel)
    state = bootstrap_state(out.modules)
    if not out.report.is_file() and sel.mode == "step" and not state.get("steps_marked"):
        sel = replace(sel, mode="run", range_name=RUN_RANGE, launch_count=sel.launch_count or FIRST_KERNELS)
        (say or (lambda _m: None))(f"nsroof: the script marked no step (no optimizer step, no "
                                   f"nsroof.step()): profiling its first {sel.launch_count} kernels instead")
        cmd = _profile(ncu, command, out, metrics, sel)
        state = bootstrap_state(out.modules)
    if not out.report.is_file():
        raise NsroofError(_no_report_reason(sel, state, out))
    wall_s = time.perf_counter() - t0
    export(ncu, out)
    report = analyze(out, machine=machine, ncu_cmd=cmd)
    report.metadata["ncu_selection"] = {**sel.facts(), **log_facts(out.log), "wall_s": round(wall_s, 3),
                                        "steps_marked": state.get("steps_marked")}
    report.metadata["ncu_clock_control"] = sel.clock
    return report, out, cmd


def _profile(ncu: str, command: Sequence[str], out: Outputs, metrics: Sequence[str],
             sel: Selection) -> list[str]:
    cmd = ncu_command(ncu, command, out, metrics=metrics, selection=sel)
    for stale in (out.report, out.modules):
        stale.unlink(missing_ok=True)
    proc = subprocess.run(cmd, env=_env(sel))
    state = bootstrap_state(out.modules)
    if proc.returncode != 0:
        why = f": {state['error']}" if state.get("error") else ""
        raise NsroofError(f"ncu exited with status {proc.returncode}{why}; its messages are in {out.log}")
    return cmd


def _no_report_reason(sel: Selection, state: dict[str, Any], out: Outputs) -> str:
    where = f"the NVTX range {sel.nvtx_filter()}"
    head = f"ncu wrote no report ({out.report}): "
    if sel.mode == "step" and state and not state.get("range_opened"):
        return (head + f"no kernel ran inside {where}: it opens at the end of step {sel.warmup_steps} and "
                f"the script marked {state.get('steps_marked', 0)} step(s): lower --warmup-steps, or use "
                "--whole")
    if state and not state.get("nvtx_listening"):
        return (head + f"{where} never reached ncu — NVTX backend {state.get('nvtx_backend')} had no tool "
                f"listening; see {out.log}")
    hint = f"; wrap the region with nsroof.annotate({sel.range_name!r})" if sel.mode == "range" else ""
    return head + f"no kernel ran inside {where} — see {out.log}{hint}"


def bootstrap_state(path: Path) -> dict[str, Any]:
    """What the bootstrap wrote about its run: module range names, NVTX backend, steps marked, range
    opened."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def export(ncu: str, out: Outputs) -> Path:
    from nsroof.atomic import atomic_write_bytes

    proc = subprocess.run(export_command(ncu, out), env=_env(), capture_output=True)
    if proc.returncode != 0:
        first = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip().splitlines()
        raise NsroofError(f"ncu could not export {out.report}: "
                          f"{first[0] if first else f'status {proc.returncode}'}")
    atomic_write_bytes(out.csv, proc.stdout)
    return out.csv


def analyze(out: Outputs, *, machine: Any = None, ncu_cmd: Sequence[str] = ()) -> Any:
    from nsroof.pipeline import analyze as run_pipeline

    report = run_pipeline([out.csv], machine=machine if machine is not None else local_machine())
    modules = load_module_names(out.modules)
    report.frame = join_nvtx(report.frame, modules)
    report.metadata["collector"] = "ncu"
    report.metadata["ncu_command"] = list(ncu_cmd)
    report.metadata["ncu_report"] = str(out.report)
    report.metadata["nvtx_backend"] = bootstrap_state(out.modules).get("nvtx_backend", "")
    return report


def local_machine() -> Any:
    """The local CUDA device's measured profile when `nsroof measure --device cuda` cached one, else its
    datasheet entry, as `nsroof profile` picks (None when unknown: the report then matches each kernel's
    device name)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    from nsroof.collectors.torch_profile import resolve_machine

    return resolve_machine(None, cuda=True, warnings=[])


def load_module_names(path: Path) -> set[str]:
    return {str(n) for n in bootstrap_state(path).get("module_ranges", [])}


def parse_op_range(name: str) -> tuple[str, str] | None:
    """('aten::addmm', '[[256], [64, 128], …]') from an emit_nvtx range name; None for other ranges."""
    m = _OP_RANGE.match(name)
    if m is None:
        return None
    return m.group("op").strip(), m.group("sizes") or ""


def join_nvtx(frame: pd.DataFrame, module_ranges: set[str]) -> pd.DataFrame:
    """Fill op / input_shapes (innermost emit_nvtx range) and module (innermost module range) from each
    row's NVTX path. Rows keep what they already have when the path holds nothing of the kind."""
    import pandas as pd

    from nsroof.collectors.nvtx_ranges import BACKWARD_SUFFIX

    if frame.empty:
        return frame
    ops, shapes, mods = [], [], []
    for path, op0, shapes0, mod0 in zip(frame["nvtx_path"].astype(str), frame["op"].astype(str),
                                         frame["input_shapes"].astype(str), frame["module"].astype(str),
                                         strict=True):
        names = [n for n in path.split("/") if n] if path else []
        op, sizes, module = op0, shapes0, mod0
        for n in reversed(names):
            parsed = parse_op_range(n)
            if parsed is not None:
                op, sizes = parsed[0], parsed[1] or sizes
                break
        for n in reversed(names):
            base = n.removesuffix(BACKWARD_SUFFIX)
            if base in module_ranges:
                module = base
                break
        ops.append(op)
        shapes.append(sizes)
        mods.append(module)
    out = frame.copy()
    out["op"] = pd.Series(ops, index=frame.index, dtype=object)
    out["input_shapes"] = pd.Series(shapes, index=frame.index, dtype=object)
    out["module"] = pd.Series(mods, index=frame.index, dtype=object)
    return out


# --------------------------------------------------------------------------- the bootstrap (profiled process)


def main(argv: Sequence[str] | None = None) -> int:
    """python -m nsroof.collectors.ncu_run --range NAME --modules-file PATH [--user-range | --after-steps W]
    -- script.py args…"""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m nsroof.collectors.ncu_run")
    parser.add_argument("--range", default=DEFAULT_RANGE)
    parser.add_argument("--modules-file", type=Path)
    parser.add_argument("--user-range", action="store_true", help="the script opens the range itself")
    parser.add_argument("--after-steps", type=int, metavar="W",
                        help="open the range at the end of step W and close it at the end of step W+1")
    parser.add_argument("--analyze", metavar="BASE", type=Path,
                        help="instead of running a script: analyze BASE.csv (an export of BASE.ncu-rep) with "
                             "the module names in BASE.modules.json and write BASE.parquet "
                             "(`nsroof ncu --dry-run`'s last step)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    ns = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    command = ns.command[1:] if ns.command[:1] == ["--"] else ns.command
    if ns.analyze is not None:
        try:
            out = outputs_for(ns.analyze)
            analyze(out).write(out.parquet)
        except NsroofError as exc:
            print(f"nsroof: error: {exc}", file=sys.stderr)
            return 2
        print(out.parquet)
        return 0
    state: dict[str, Any] = {}
    try:
        return _bootstrap(ns, command, state)
    except NsroofError as exc:
        state["error"] = str(exc)
        print(f"nsroof: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if ns.modules_file is not None:
            from nsroof.atomic import atomic_write_text
            from nsroof.collectors import nvtx_ranges

            state["module_ranges"] = sorted(nvtx_ranges.MODULE_RANGE_NAMES)
            atomic_write_text(ns.modules_file, json.dumps(state))


def _bootstrap(ns: Any, command: list[str], state: dict[str, Any]) -> int:
    from contextlib import ExitStack

    from nsroof.collectors import nvtx_ranges
    from nsroof.collectors.script import run_script, split_command

    kind, target, args = split_command(command)
    name = check_range_name(ns.range)
    with ExitStack() as stack:
        stack.enter_context(nvtx_ranges.annotate_all_modules())
        stack.enter_context(_emit_nvtx())
        backend, listening = nvtx_ranges.backend()
        state.update(nvtx_backend=backend, nvtx_listening=listening, range=name, steps_marked=0)
        _check_listening(backend, listening, name)
        if ns.user_range:
            nvtx_ranges.PROCESS_WIDE.add(name)  # the script's annotate(NAME) spans every thread
        elif ns.after_steps is not None:
            stack.callback(StepWindow(name, ns.after_steps, state).install())
        else:
            stack.enter_context(nvtx_ranges.process_range(name))
        run_script(kind, target, args)
    return 0


def _check_listening(backend: str, listening: bool, name: str) -> None:
    """Say which NVTX backend is in use; under an NVTX tool (ncu sets NVTX_INJECTION64_PATH) a range that
    would not reach it is an error now, before the script runs, not an empty report later."""
    domain = {"nvtx": "domain nsroof", "torch.cuda.nvtx": "default domain"}.get(backend, "no NVTX")
    print(f"nsroof: NVTX backend {backend} ({domain}); "
          + ("a tool is listening" if listening else "no tool listening"), file=sys.stderr)
    if not listening and os.environ.get("NVTX_INJECTION64_PATH"):
        raise NsroofError(f"the NVTX range {name} cannot reach the profiler: backend {backend} has no tool "
                          "listening although one is injected (NVTX_INJECTION64_PATH) — install the nvtx "
                          "package, or use a CUDA build of torch (torch.cuda.nvtx)")


class StepWindow:
    """Opens the process-wide range `name` at the end of step `after` and closes it at the end of step
    `after`+1 (step 0: from the start). A step ends at nsroof.step(), or at each optimizer step in a script
    that never calls it (the boundaries nsroof.profile counts)."""

    def __init__(self, name: str, after: int, state: dict[str, Any]) -> None:
        from nsroof.collectors import nvtx_ranges

        self.range = nvtx_ranges.process_range(name)
        self.after, self.state = after, state
        self.counts = {"nsroof": 0, "optimizer": 0}
        self.open = False

    def install(self) -> Any:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        from nsroof.collectors import nvtx_ranges

        remove_step = nvtx_ranges.add_step_listener(lambda n: self.boundary("nsroof"))
        handle = register_optimizer_step_post_hook(lambda opt, args, kwargs: self.boundary("optimizer"))
        if self.after == 0:
            self._open()

        def uninstall() -> None:
            remove_step()
            handle.remove()
            self._close()

        return uninstall

    def boundary(self, source: str) -> None:
        self.counts[source] += 1
        active = "nsroof" if self.counts["nsroof"] else "optimizer"
        if source != active:
            return
        n = self.counts[active]
        self.state["steps_marked"] = n
        self.state["step_source"] = active
        if n == self.after and not self.open:
            self._open()
        elif n >= self.after + 1:
            self._close()

    def _open(self) -> None:
        if not self.open and not self.state.get("range_closed"):
            self.range.__enter__()
            self.open = True
            self.state["range_opened"] = True

    def _close(self) -> None:
        if self.open:
            self.range.__exit__(None, None, None)
            self.open = False
            self.state["range_closed"] = True


def _emit_nvtx() -> Any:
    """torch's emit_nvtx(record_shapes=True) when CUDA is there (it raises without a driver)."""
    from contextlib import nullcontext

    try:
        import torch
    except ImportError:
        return nullcontext()
    if not torch.cuda.is_available():
        return nullcontext()
    return torch.autograd.profiler.emit_nvtx(record_shapes=True)


if __name__ == "__main__":
    sys.exit(main())
