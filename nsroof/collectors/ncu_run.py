"""`nsroof ncu`: run a PyTorch script under Nsight Compute with the counters the hierarchical roofline needs,
export the result and analyze it, kernels joined to ops and modules through their NVTX stack.

The profiling command (``ncu_command``):

    LC_ALL=C ncu --nvtx --nvtx-include nsroof@<range> --metrics <required_metrics(cc, set)> --print-units base
        -o <out>.ncu-rep -f --log-file <out>.log  <python> -m nsroof.collectors.ncu_run --range <range>
        --modules-file <out>.modules.json -- script.py args…

The filter ``nsroof@<range>`` (no trailing '/') is ncu's syntax for a start/end range of the nsroof domain
(``ncu --help``: ``--nvtx-include "Domain A@Range A"`` profiles kernels inside start/end range 'Range A' of
'Domain A'). A start/end range is process-wide: kernels launched from autograd's backward threads and the
optimizer are inside it, where a push/pop range (``nsroof@<range>/``) holds only its own thread's kernels
and would profile no backward kernel.

The script runs through a small bootstrap (``main`` below, in the profiled process): it ranges every
nn.Module forward and backward in the nsroof domain, turns on torch's emit_nvtx (record_shapes) when CUDA is
there, so each kernel's default-domain stack ends in the aten op that launched it, opens the `<range>`
start/end range around the whole script (or, with ``--range NAME``, makes the script's own
``nsroof.annotate(NAME)`` open one too), and writes the module range names it used, so the join can tell
module ranges from other ranges.

``nsroof ncu --dry-run`` prints these commands and runs nothing (``dry_run``): on clusters people wrap the
ncu line in srun/mpirun themselves.

Export: ``LC_ALL=C ncu -i <out>.ncu-rep --csv --page raw --print-units base`` into <out>.csv; then
nsroof.pipeline.analyze and ``join_nvtx`` fill the report's op, input_shapes and module columns.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsroof.errors import NsroofError, ToolNotFoundError

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_RANGE = "nsroof.run"
DOMAIN = "nsroof"
NCU_HINT = ("install the Nsight Compute CLI (it ships with the CUDA toolkit, or from "
            "https://developer.nvidia.com/nsight-compute) and put the folder holding `ncu` on PATH, "
            "or set NSROOF_NCU to its path")

# emit_nvtx range names: "<op>[, seq = N], op_id = K[, sizes = [[…], …][, input_op_ids = …]]"
_OP_RANGE = re.compile(r"^(?P<op>[^,]+?)(?:, seq = \d+)?, op_id = \d+(?:, sizes = (?P<sizes>\[.*?\]))?(?:, input_op_ids = .*)?$")


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


def check_range_name(name: str) -> str:
    # ncu's NVTX filter grammar gives '/', '[', ']', '+', '*' and '@' a meaning; '"' breaks its CSV.
    bad = sorted(set(name) & set('/[]+*@"'))
    if not name or bad:
        raise NsroofError(f"range name {name!r} cannot be used in an ncu NVTX filter"
                          + (f" (it contains {' '.join(bad)})" if bad else "") + "; use letters, digits, '.', '_' or '-'")
    return name


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
    range_name: str = DEFAULT_RANGE,
    user_range: bool = False,
) -> list[str]:
    python, rest = split_python(command)
    if not rest:
        raise NsroofError("no script to profile after the python executable")
    bootstrap = [python, "-m", "nsroof.collectors.ncu_run", "--range", range_name,
                 "--modules-file", str(out.modules)] + (["--user-range"] if user_range else []) + ["--", *rest]
    return [
        ncu,
        "--nvtx",
        "--nvtx-include", nvtx_filter(range_name),
        "--metrics", ",".join(metrics),
        "--print-units", "base",
        "-o", str(out.report),
        "-f",
        "--log-file", str(out.log),
        *bootstrap,
    ]


def nvtx_filter(range_name: str) -> str:
    """ncu's start/end range filter for the nsroof domain's `range_name` (see the module docstring)."""
    return f"{DOMAIN}@{check_range_name(range_name)}"


def dry_run(command: Sequence[str], output: str | os.PathLike[str], *, range_name: str | None = None,
            metric_set: str = "roofline") -> str:
    """The exact commands `nsroof ncu` would run (profile, export, analyze), one per line, shell-quoted;
    nothing runs. Without a local ncu the executable is written `ncu` (resolved where it will run)."""
    import shlex

    from nsroof.models.metric_formulas import required_metrics

    try:
        ncu = find_ncu()
    except ToolNotFoundError:
        ncu = "ncu"
    out = outputs_for(output)
    name = check_range_name(range_name or DEFAULT_RANGE)
    cmd = ncu_command(ncu, command, out, metrics=required_metrics(device_cc(), metric_set), range_name=name,
                      user_range=range_name is not None)
    env = _env()
    prefix = f"LC_ALL=C PYTHONPATH={shlex.quote(env['PYTHONPATH'])} "
    return "\n".join([
        "# 1. profile (wrap this line in srun/mpirun as your cluster needs)",
        prefix + shlex.join(cmd),
        "# 2. export the raw page",
        prefix + shlex.join(export_command(ncu, out)) + " > " + shlex.quote(str(out.csv)),
        "# 3. analyze: the export joined to ops and modules through the NVTX stack, written to the report",
        shlex.join(["python", "-m", "nsroof.collectors.ncu_run", "--analyze", str(out.base)]),
    ])


def export_command(ncu: str, out: Outputs) -> list[str]:
    return [ncu, "-i", str(out.report), "--csv", "--page", "raw", "--print-units", "base"]


def _env() -> dict[str, str]:
    # ncu prints numbers in the locale of its process: C gives no grouping and '.' decimals.
    env = {**os.environ, "LC_ALL": "C"}
    repo_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo_root, env.get("PYTHONPATH", "")) if p)
    return env


def run(
    command: Sequence[str],
    output: str | os.PathLike[str],
    *,
    range_name: str | None = None,
    metric_set: str = "roofline",
    machine: Any = None,
) -> tuple[Any, Outputs, list[str]]:
    """Profile, export, analyze. Returns (Report, Outputs, the ncu command that ran)."""
    from nsroof.models.metric_formulas import required_metrics

    ncu = find_ncu()
    out = outputs_for(output)
    out.base.parent.mkdir(parents=True, exist_ok=True)
    name = check_range_name(range_name or DEFAULT_RANGE)
    metrics = required_metrics(device_cc(), metric_set)
    cmd = ncu_command(ncu, command, out, metrics=metrics, range_name=name, user_range=range_name is not None)
    for stale in (out.report, out.modules):
        stale.unlink(missing_ok=True)
    proc = subprocess.run(cmd, env=_env())
    if proc.returncode != 0:
        raise NsroofError(f"ncu exited with status {proc.returncode}; its messages are in {out.log}")
    if not out.report.is_file():
        raise NsroofError(f"ncu wrote no report ({out.report}): no kernel ran inside the NVTX range "
                          f"nsroof@{name} — see {out.log}"
                          + ("" if range_name is None else f"; wrap the region with nsroof.annotate({name!r})"))
    export(ncu, out)
    report = analyze(out, machine=machine, ncu_cmd=cmd)
    return report, out, cmd


def export(ncu: str, out: Outputs) -> Path:
    from nsroof.atomic import atomic_write_bytes

    proc = subprocess.run(export_command(ncu, out), env=_env(), capture_output=True)
    if proc.returncode != 0:
        first = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip().splitlines()
        raise NsroofError(f"ncu could not export {out.report}: {first[0] if first else f'status {proc.returncode}'}")
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
    return report


def local_machine() -> Any:
    """The datasheet entry of the local CUDA device (None when unknown: the report then matches each
    kernel's device name)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    from nsroof.models.machines import lookup_device

    return lookup_device(torch.cuda.get_device_name())


def load_module_names(path: Path) -> set[str]:
    if not path.is_file():
        return set()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return set()
    return {str(n) for n in data.get("module_ranges", [])} if isinstance(data, dict) else set()


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
                                         frame["input_shapes"].astype(str), frame["module"].astype(str), strict=True):
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
    """python -m nsroof.collectors.ncu_run --range NAME --modules-file PATH [--user-range] -- script.py args…"""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m nsroof.collectors.ncu_run")
    parser.add_argument("--range", default=DEFAULT_RANGE)
    parser.add_argument("--modules-file", type=Path)
    parser.add_argument("--user-range", action="store_true", help="the script opens the range itself")
    parser.add_argument("--analyze", metavar="BASE", type=Path,
                        help="instead of running a script: analyze BASE.csv (an export of BASE.ncu-rep) with the module "
                             "names in BASE.modules.json and write BASE.parquet (`nsroof ncu --dry-run`'s last step)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    ns = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    command = ns.command[1:] if ns.command[:1] == ["--"] else ns.command
    if ns.analyze is not None:
        from nsroof.errors import NsroofError as Failure

        try:
            out = outputs_for(ns.analyze)
            analyze(out).write(out.parquet)
        except Failure as exc:
            print(f"nsroof: error: {exc}", file=sys.stderr)
            return 2
        print(out.parquet)
        return 0

    from contextlib import ExitStack

    from nsroof.collectors import nvtx_ranges
    from nsroof.collectors.script import run_script, split_command
    from nsroof.errors import NsroofError as Error

    kind, target, args = split_command(command)
    try:
        with ExitStack() as stack:
            stack.enter_context(nvtx_ranges.annotate_all_modules())
            stack.enter_context(_emit_nvtx())
            if ns.user_range:
                nvtx_ranges.PROCESS_WIDE.add(ns.range)  # the script's annotate(NAME) spans every thread
            else:
                stack.enter_context(nvtx_ranges.process_range(ns.range))
            run_script(kind, target, args)
    except Error as exc:
        print(f"nsroof: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if ns.modules_file is not None:
            from nsroof.atomic import atomic_write_text

            atomic_write_text(ns.modules_file, json.dumps({"module_ranges": sorted(nvtx_ranges.MODULE_RANGE_NAMES)}))
    return 0


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
