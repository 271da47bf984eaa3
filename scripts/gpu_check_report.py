"""Write what `make gpu-check` saw as a new entry at the top of docs/measurements.md's "GPU runs".

    python scripts/gpu_check_report.py OUT_DIR docs/measurements.md

Only what the run wrote goes in: OUT_DIR/steps.tsv (step, exit status, seconds), the last line of each
step's log, the profile and ncu reports (rows, kernels, backward kernels, coverage, TF32 facts) and
machine.json (device, driver, measured roofs). A missing file is said to be missing, never filled in.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

MARK = "## GPU runs\n"


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


def entry(out: Path) -> str:
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    steps = []
    try:
        steps = [line.split("\t") for line in (out / "steps.tsv").read_text().splitlines() if line]
    except OSError:
        pass
    lines = [f"### {now}: `make gpu-check`", ""]
    lines += _machine_lines(out / "machine.json")
    lines += ["", "| step | exit | seconds | last line of its log |", "|---|---|---|---|"]
    for name, rc, seconds in steps:
        lines.append(f"| {name} | {rc} | {seconds} | {_tail(out / f'{name}.txt').replace('|', '/')} |")
    lines.append("")
    lines += _report_lines(out / "profile.parquet", "nsroof profile (examples/train_tiny.py, CUDA)")
    lines += _report_lines(out / "ncu.parquet", "nsroof ncu (examples/train_tiny.py, --set minimal)")
    return "\n".join(lines) + "\n\n"


def main(argv: list[str]) -> int:
    out, doc = Path(argv[1]), Path(argv[2])
    text = doc.read_text() if doc.is_file() else "# Measurements\n\n" + MARK
    record = entry(out)
    (out / "measurements-entry.md").write_text(record)
    if MARK in text:
        head, tail = text.split(MARK, 1)
        text = head + MARK + "\n" + record + tail.lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + MARK + "\n" + record
    doc.write_text(text)
    print(record)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
