"""`nsroof nsys`: run a PyTorch script under Nsight Systems with the traces the roofline needs, export the
report to SQLite and analyze it (nsroof.importers.nsys).

The profiling command (``nsys_command``):

    NSYS_NVTX_PROFILER_REGISTER_ONLY=0 nsys profile --trace=cuda,nvtx,osrt --cuda-graph-trace=node
        --sample=none --cpuctxsw=none [--capture-range=nvtx --nvtx-capture=<range>[@nsroof]
        --capture-range-end=stop] --force-overwrite=true --output=<out>.nsys-rep [--nsys-args words]
        <python> -m nsroof.collectors.ncu_run --range <range> --modules-file <out>.modules.json
        [--after-steps W | --user-range] -- script.py args…

The script runs through `nsroof ncu`'s bootstrap (nsroof.collectors.ncu_run.main): every nn.Module forward
and backward a range, torch's emit_nvtx(record_shapes=True) when CUDA is there (the ops and their input
sizes, read back by nsroof.importers.nsys.op_text), and the process-wide start/end range around the profiled
steps (`nsroof ncu`'s warm-up logic: by default one step after one warm-up step). nsys's NVTX capture range
starts the collection when that range opens and stops it when it closes (``--capture-range=nvtx``: the
range text must be matched without NVTX string registration, hence NSYS_NVTX_PROFILER_REGISTER_ONLY=0);
`--whole` profiles the whole run. Node-level graph tracing gives each kernel of a CUDA graph replay its row.

Export: ``nsys export --type sqlite`` into <out>.sqlite. A capture records the host's environment variables
and process list: they are deleted from the SQLite export before anything reads it (``scrub``), and the
.nsys-rep, which holds them too, is removed unless `--keep-report` (then it stays beside, not for sharing).
Then nsroof.pipeline.analyze, the module column filled from the module ranges (``join_nvtx``).
"""

from __future__ import annotations

import os
import re
import shlex
import sqlite3
import subprocess
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nsroof.collectors.ncu_run import (
    _env,
    bootstrap_state,
    join_nvtx,
    load_module_names,
    local_machine,
    resolve_backend,
    split_python,
)
from nsroof.collectors.ncu_select import DOMAIN, RUN_RANGE, Selection, check_range_name
from nsroof.errors import NsroofError, ToolNotFoundError
from nsroof.importers.nsys.rep import NSYS_ENV, export_command, find_nsys

DEFAULT_TRACE = "cuda,nvtx,osrt"
REGISTER_ONLY = "NSYS_NVTX_PROFILER_REGISTER_ONLY"
NSYS_HINT = ("install Nsight Systems (https://developer.nvidia.com/nsight-systems, or the CUDA toolkit) and "
             f"put the folder holding `nsys` on PATH, or set {NSYS_ENV} to its path")
# what a capture records of the host beside the profile: environment variables, every process of the machine
_SCRUB = (("TARGET_INFO_SYSTEM_ENV", "1"), ("PROCESSES", "1"),
          ("META_DATA_CAPTURE", "name LIKE '%ENVIRONMENT_VARIABLE%'"))
_ENV_BLOCK = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=[^\x00]*\x00[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Outputs:
    """Files one `nsroof nsys` run writes, all from one base path."""

    base: Path

    def _with(self, suffix: str) -> Path:
        return self.base.with_name(self.base.name + suffix)

    @property
    def report(self) -> Path:
        return self._with(".nsys-rep")

    @property
    def sqlite(self) -> Path:
        return self._with(".sqlite")

    @property
    def modules(self) -> Path:
        return self._with(".modules.json")

    @property
    def parquet(self) -> Path:
        return self._with(".parquet")


def outputs_for(output: str | os.PathLike[str]) -> Outputs:
    """`-o run`, `-o run.nsys-rep` or `-o run.parquet` -> run.nsys-rep, run.sqlite, run.parquet."""
    p = Path(output)
    name = p.name.removesuffix(".nsys-rep").removesuffix(".parquet").removesuffix(".sqlite")
    return Outputs(p.with_name(name))


def capture_filter(selection: Selection) -> str:
    """nsys's --nvtx-capture value for the selection's range: `range@domain` in the nsroof domain (the nvtx
    package), `range` in the default domain (torch.cuda.nvtx). Range names hold no '@' (check_range_name)."""
    name = check_range_name(selection.range_name)
    return f"{name}@{DOMAIN}" if selection.nvtx_backend == "nvtx" else name


def nsys_command(nsys: str, command: Sequence[str], out: Outputs, *, selection: Selection | None = None,
                 trace: str = DEFAULT_TRACE, extra: Sequence[str] = ()) -> list[str]:
    """nsys profile [the traces, the capture range] -o … <python> -m nsroof.collectors.ncu_run [the range to
    open] -- script args: nsys's options before the application, the script's after it."""
    sel = selection or Selection()
    python, rest = split_python(command)
    if not rest:
        raise NsroofError("no script to profile after the python executable")
    how = {"range": ["--user-range"], "step": ["--after-steps", str(sel.warmup_steps)], "run": []}[sel.mode]
    capture = ([] if sel.mode == "run" else
               ["--capture-range=nvtx", f"--nvtx-capture={capture_filter(sel)}", "--capture-range-end=stop"])
    bootstrap = [python, "-m", "nsroof.collectors.ncu_run", "--range", sel.range_name,
                 "--modules-file", str(out.modules), *how, "--", *rest]
    return [nsys, "profile", f"--trace={trace}", "--cuda-graph-trace=node", "--sample=none",
            "--cpuctxsw=none", *capture, "--force-overwrite=true", f"--output={out.report}", *extra,
            *bootstrap]


def env(selection: Selection | None = None) -> dict[str, str]:
    return {**_env(selection), REGISTER_ONLY: "0"}


def dry_run(command: Sequence[str], output: str | os.PathLike[str], *, selection: Selection | None = None,
            trace: str = DEFAULT_TRACE, extra: Sequence[str] = ()) -> str:
    """The exact commands `nsroof nsys` would run (profile, export, analyze), one per line, shell-quoted;
    nothing runs. Without a local nsys the executable is written `nsys` (resolved where it will run)."""
    nsys = find_nsys() or "nsys"
    out = outputs_for(output)
    sel = resolve_backend(selection or Selection(), command)
    cmd = nsys_command(nsys, command, out, selection=sel, trace=trace, extra=extra)
    variables = env(sel)
    prefix = (f"{REGISTER_ONLY}=0 NSROOF_NVTX_BACKEND={sel.nvtx_backend} "
              f"PYTHONPATH={shlex.quote(variables['PYTHONPATH'])} ")
    return "\n".join([
        "# 1. profile (wrap this line in srun/mpirun as your cluster needs)",
        prefix + shlex.join(cmd),
        "# 2. export to SQLite (then nsroof deletes the host's environment and process list from it)",
        shlex.join(export_command(nsys, out.report, out.sqlite)),
        "# 3. analyze, the module ranges joined, written to the report",
        shlex.join(["python", "-m", "nsroof.collectors.nsys_run", "--analyze", str(out.base)]),
    ])


def run(command: Sequence[str], output: str | os.PathLike[str], *, selection: Selection | None = None,
        trace: str = DEFAULT_TRACE, extra: Sequence[str] = (), keep_report: bool = False,
        machine: Any = None, say: Any = None) -> tuple[Any, Outputs, list[str]]:
    """Profile, export, scrub, analyze. Returns (Report, Outputs, the nsys command that ran). In step mode
    a script that marked no step is profiled again, whole (`say` is told)."""
    nsys = find_nsys()
    if nsys is None:
        raise ToolNotFoundError(f"nsys (Nsight Systems) not found on PATH — {NSYS_HINT}")
    out = outputs_for(output)
    out.base.parent.mkdir(parents=True, exist_ok=True)
    sel = resolve_backend(selection or Selection(), command)
    cmd = _profile(nsys, command, out, sel, trace, extra)
    state = bootstrap_state(out.modules)
    if not out.report.is_file() and sel.mode == "step" and not state.get("steps_marked"):
        sel = replace(sel, mode="run", range_name=RUN_RANGE)
        (say or (lambda _m: None))("nsroof: the script marked no step (no optimizer step, no nsroof.step()): "
                                   "profiling the whole run instead")
        cmd = _profile(nsys, command, out, sel, trace, extra)
        state = bootstrap_state(out.modules)
    if not out.report.is_file():
        raise NsroofError(f"nsys wrote no report ({out.report}): the range {capture_filter(sel)} never "
                          "opened (lower --warmup-steps, or use --whole)")
    export(nsys, out)
    if not keep_report:
        out.report.unlink(missing_ok=True)
    report = analyze(out, machine=machine, nsys_cmd=cmd)
    report.metadata["nsys_selection"] = {"mode": sel.mode, "range": sel.range_name,
                                         "capture": capture_filter(sel) if sel.mode != "run" else "",
                                         "warmup_steps": sel.warmup_steps if sel.mode == "step" else None,
                                         "trace": trace, "nvtx_backend": sel.nvtx_backend,
                                         "steps_marked": state.get("steps_marked")}
    return report, out, cmd


def _profile(nsys: str, command: Sequence[str], out: Outputs, sel: Selection, trace: str,
             extra: Sequence[str]) -> list[str]:
    cmd = nsys_command(nsys, command, out, selection=sel, trace=trace, extra=extra)
    for stale in (out.report, out.sqlite, out.modules):
        stale.unlink(missing_ok=True)
    proc = subprocess.run(cmd, env=env(sel))
    state = bootstrap_state(out.modules)
    if proc.returncode != 0 or state.get("error"):
        why = f": {state['error']}" if state.get("error") else ""
        raise NsroofError(f"nsys profile exited with status {proc.returncode}{why}")
    return cmd


def export(nsys: str, out: Outputs) -> Path:
    """<out>.sqlite from <out>.nsys-rep, the host's environment and process list deleted from it."""
    proc = subprocess.run(export_command(nsys, out.report, out.sqlite), capture_output=True, text=True,
                          errors="replace")
    if proc.returncode != 0 or not out.sqlite.is_file():
        said = (proc.stderr or proc.stdout).strip().splitlines()
        raise NsroofError(f"nsys could not export {out.report}: {said[-1] if said else proc.returncode}")
    scrub(out.sqlite)
    return out.sqlite


def scrub(path: Path) -> None:
    """Delete what a capture records of the host (environment variables, the machine's process list) from
    an export, and the free pages that held them (VACUUM), so the file can be shared."""
    with closing(sqlite3.connect(path)) as db:
        tables = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table, where in _SCRUB:
            if table in tables:
                db.execute(f"DELETE FROM {table} WHERE {where}")
        if "StringIds" in tables:  # the process's environment block, one string of NUL-separated NAME=value
            blocks = [(i,) for i, v in db.execute("SELECT id, value FROM StringIds WHERE value LIKE '%=%'")
                      if _ENV_BLOCK.match(str(v))]
            db.executemany("UPDATE StringIds SET value = '' WHERE id = ?", blocks)
        db.commit()
        db.execute("VACUUM")


def analyze(out: Outputs, *, machine: Any = None, nsys_cmd: Sequence[str] = ()) -> Any:
    from nsroof.pipeline import analyze as run_pipeline

    report = run_pipeline([out.sqlite], machine=machine if machine is not None else local_machine())
    report.frame = join_nvtx(report.frame, load_module_names(out.modules))
    report.metadata["collector"] = "nsys"
    report.metadata["nsys_command"] = list(nsys_cmd)
    report.metadata["nvtx_backend"] = bootstrap_state(out.modules).get("nvtx_backend", "")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """python -m nsroof.collectors.nsys_run --analyze BASE: analyze BASE.sqlite with the module names in
    BASE.modules.json and write BASE.parquet (`nsroof nsys --dry-run`'s last step)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m nsroof.collectors.nsys_run")
    parser.add_argument("--analyze", metavar="BASE", type=Path, required=True)
    ns = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    out = outputs_for(ns.analyze)
    if not out.sqlite.is_file():
        print(f"nsroof: error: {out.sqlite}: no such file — export the report first (`nsys export`)",
              file=sys.stderr)
        return 2
    try:
        scrub(out.sqlite)
        analyze(out).write(out.parquet)
    except (NsroofError, sqlite3.Error) as exc:
        print(f"nsroof: error: {exc}", file=sys.stderr)
        return 2
    print(out.parquet)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
