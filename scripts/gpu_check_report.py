"""What `make gpu-check` saw: the summary and the docs/measurements.md entry, and the files that come back.

    python scripts/gpu_check_report.py WORK OUT [--fake] [--elapsed S]     (scripts/gpu_check.sh runs this)
    python scripts/gpu_check_report.py --insert ENTRY docs/measurements.md (commit a run's entry)

From WORK (the run's scratch folder) into OUT, at most 8 files (what a lent GPU machine returns):
summary.txt (verdict, each step's exit status, seconds and budget, the speed figures the GPU tests recorded
against their targets: never part of the verdict), measurements-entry.md, and copies
of machine.json, points.csv, profile.parquet, ncu.parquet, nsys.parquet (where nsys ran), plus logs.txt (every step's log and ncu's own
log, one after another). Only what the run wrote goes in: a missing file is said to be missing, never
filled in. A GPU_CHECK_FAKE run's entry says it is simulated (its numbers are the CPU's).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sys
from pathlib import Path
from typing import Any

MARK = "## GPU runs\n"
RETURNED = ("machine.json", "points.csv", "profile.parquet", "ncu.parquet", "nsys.parquet")
LOGS = ("pytest.txt", "measure.txt", "profile.txt", "ncu.txt", "ncu.log", "nsys.txt")


def _tail(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return lines[-1][:200] if lines else "(empty log)"


def _report_lines(path: Path, label: str) -> list[str]:
    if not path.is_file():
        return [f"- {label}: no report written ({path.name} missing)"]
    try:
        from nsroof.report.parquet import load, read_metadata

        report = load(path)
        meta = read_metadata(path)
    except Exception as exc:  # the entry records the failure instead of stopping the record
        return [f"- {label}: {path.name} unreadable ({type(exc).__name__}: {exc})"]
    dram = report[report["level"].astype(str) == "dram"]
    backward = dram["nvtx_path"].astype(str).str.contains("(backward)", regex=False)
    duration = dram["duration_s"].astype("float64").fillna(0.0)
    covered = float(duration[dram["flops"].notna()].sum() / duration.sum()) if duration.sum() > 0 else float("nan")
    lines = [f"- {label}: {len(dram)} rows on {', '.join(sorted(set(dram['device'].astype(str))))}; "
             f"{int(backward.sum())} under a backward range; analytic/counter FLOPs on {covered:.1%} of the time; "
             f"bounds {dram['bound'].astype(str).value_counts().to_dict()}"]
    facts = (meta.get("inputs") or [{}])[0].get("facts", {}) if isinstance(meta.get("inputs"), list) else {}
    if facts.get("tf32"):
        lines.append(f"  - TF32: {facts['tf32']}")
    selection = meta.get("ncu_selection")
    if isinstance(selection, dict):
        lines.append(f"  - ncu selection: {selection.get('mode')} {selection.get('nvtx_filter')}, clock control "
                     f"{meta.get('ncu_clock_control')}, NVTX backend {meta.get('nvtx_backend')}, "
                     f"{selection.get('profiled_kernels')} kernels profiled, replay passes median "
                     f"{selection.get('passes_median')} max {selection.get('passes_max')}, {selection.get('wall_s')} s")
    if meta.get("ncu_command"):
        lines.append(f"  - ncu command: `{' '.join(meta['ncu_command'])}`")
    return lines


def _machine_lines(path: Path) -> list[str]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return [f"- measure: no machine profile ({exc})"]
    env = data.get("environment", {})
    lines = [f"- device: {env.get('device_name')} (CC {env.get('compute_capability')}, {env.get('sm_count')} SMs, "
             f"uuid {env.get('device_uuid')}), driver {env.get('driver_version')}, CUDA {env.get('cuda_runtime')}, "
             f"torch {env.get('torch')}, measured at {env.get('measured_at')}",
             f"- clocks at start (MHz): {env.get('clocks_mhz_at_start')}"]
    for dtype, value in data.get("peak_flop_per_s", {}).items():
        lines.append(f"- peak {dtype}: {value / 1e12:.1f} TFLOP/s")
    for level, value in data.get("bandwidth_bytes_per_s", {}).items():
        lines.append(f"- bandwidth {level}: {value / 1e12:.2f} TB/s")
    for dtype, why in env.get("not_measured", {}).items():
        lines.append(f"- peak {dtype}: not measured: {why}")
    return lines


def read_speed(work: Path) -> list[dict[str, Any]]:
    """The speed figures the GPU tests recorded (WORK/speed.jsonl, written by record_speed in
    tests/collectors/measure/test_measure_gpu.py), in their order; [] when none was recorded. A line that
    is not such a figure is left out."""
    try:
        text = (work / "speed.jsonl").read_text()
    except OSError:
        return []
    figures = []
    for line in text.splitlines():
        try:
            figure = json.loads(line)
        except ValueError:
            continue
        if (isinstance(figure, dict) and {"name", "value", "target", "met"} <= set(figure)
                and isinstance(figure["value"], (int, float))):
            figures.append(figure)
    return figures


def speed_lines(work: Path) -> list[str]:
    """One line a recorded speed figure: a figure off its target is a finding to look into, not a failed
    check (the verdict is the steps' exit statuses)."""
    figures = read_speed(work)
    if not figures:
        return ["- speed: none recorded (the GPU tests skipped, or did not run)"]
    lines = []
    for f in figures:
        detail = f" ({f['detail']})" if f.get("detail") else ""
        lines.append(f"- speed: {f['name']} = {f['value']:.3g}, target {f['target']}: "
                     f"{'met' if f['met'] else 'MISSED'}{detail}")
    return lines


def read_steps(work: Path) -> list[list[str]]:
    """[name, exit status, seconds, budget] per step, from WORK/steps.tsv ([] when it is missing)."""
    try:
        rows = [line.split("\t") for line in (work / "steps.tsv").read_text().splitlines() if line]
    except OSError:
        return []
    return [(row + ["", "", "", ""])[:4] for row in rows]


def entry(work: Path, *, fake: bool = False) -> str:
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = f"### {now}: `make gpu-check`"
    if fake:
        title += " (GPU_CHECK_FAKE: a simulated device and a stand-in ncu; not a measurement)"
    lines = [title, ""]
    lines += _machine_lines(work / "machine.json")
    from nsroof import markdown  # stdlib only: it loads without torch, pandas or pyarrow

    lines += ["", *markdown.table(["step", "exit", "seconds", "budget", "last line of its log"],
                                  [(name, rc, seconds, budget, _tail(work / f"{name}.txt"))
                                   for name, rc, seconds, budget in read_steps(work)])]
    lines.append("")
    lines += speed_lines(work)
    lines.append("")
    lines += _report_lines(work / "profile.parquet", "nsroof profile (examples/train_tiny.py)")
    lines += _report_lines(work / "ncu.parquet", "nsroof ncu (examples/train_tiny.py, one step, --clock-control none)")
    if (work / "nsys.parquet").is_file():  # the nsys step runs where nsys is
        lines += _report_lines(work / "nsys.parquet", "nsroof nsys (examples/train_tiny.py, one step)")
    return "\n".join(lines) + "\n\n"


def summary(work: Path, *, fake: bool, elapsed_s: str) -> str:
    steps = read_steps(work)
    passed = bool(steps) and all(rc == "0" for _name, rc, _s, _b in steps)
    head = f"gpu-check {'PASSED' if passed else 'FAILED'}" + (" (GPU_CHECK_FAKE: simulated device)" if fake else "")
    lines = [head, f"elapsed {elapsed_s} s of a 480 s budget", "", "step      exit  seconds  budget  last line"]
    for name, rc, seconds, budget in steps:
        lines.append(f"{name:<9} {rc:>4}  {seconds:>7}  {budget:>6}  {_tail(work / f'{name}.txt')}")
    lines += ["", "speed, recorded (a missed target is a finding, not a failed step):", *speed_lines(work)]
    lines += ["", "files: summary.txt measurements-entry.md " + " ".join(n for n in RETURNED if (work / n).is_file())
              + " logs.txt"]
    return "\n".join(lines) + "\n"


def collect(work: Path, out: Path, *, fake: bool, elapsed_s: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    record = entry(work, fake=fake)
    (out / "measurements-entry.md").write_text(record)
    for name in RETURNED:
        if (work / name).is_file():
            shutil.copyfile(work / name, out / name)
    with open(out / "logs.txt", "w") as logs:
        for name in LOGS:
            if (work / name).is_file():
                logs.write(f"===== {name}\n{(work / name).read_text(errors='replace')}\n")
    (out / "summary.txt").write_text(summary(work, fake=fake, elapsed_s=elapsed_s))
    print(record)


def insert(record: str, doc: Path) -> None:
    """Put `record` at the top of the doc's "GPU runs" section (created when missing)."""
    text = doc.read_text() if doc.is_file() else "# Measurements\n\n" + MARK
    if MARK in text:
        head, tail = text.split(MARK, 1)
        text = head + MARK + "\n" + record + tail.lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + MARK + "\n" + record
    doc.write_text(text)


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--insert"]:
        insert(Path(argv[2]).read_text(), Path(argv[3]))
        return 0
    work, out = Path(argv[1]), Path(argv[2])
    elapsed = argv[argv.index("--elapsed") + 1] if "--elapsed" in argv else "?"
    collect(work, out, fake="--fake" in argv, elapsed_s=elapsed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
