"""What every benchmark module shares: where the public fixtures are, sizes overridable by environment
variables, fresh child interpreters that report one JSON line, their own peak RSS, and the targets each
module hands to benchmarks/run.py for the one table of ratio vs target.

A target is recorded by `target(...)`; run.py sets NSROOF_BENCH_RESULTS to a file that collects them
(one JSON object a line) and prints them together after the last module. Run alone, a module prints
its own targets as it goes and nothing is collected.
"""

from __future__ import annotations

import compileall
import json
import os
import statistics
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHARED = Path(os.environ.get("NSROOF_SHARED_FIXTURES", REPO.parent / "shared" / "fixtures"))
RESULTS_ENV = "NSROOF_BENCH_RESULTS"

# A child reads its own peak resident set from /proc: VmHWM is the high-water mark of this process's
# address space, which starts afresh at exec. (getrusage's ru_maxrss does not: Linux carries the
# forking parent's high-water mark over into the child, so a big parent would inflate every figure.)
PEAK_RSS = r"""
def peak_rss_bytes():
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
"""


def env_int(name: str, default: int) -> int:
    """A size or count, overridable by an environment variable (NSROOF_BENCH_...)."""
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


def shared(*parts: str) -> Path | None:
    """A file of the public fixtures collection, or None (and the bench says it skipped) when absent."""
    path = SHARED.joinpath(*parts)
    return path if path.is_file() else None


@cache
def package_bytecode() -> None:
    """Write the bytecode of nsroof's modules, as `pip install` does: the children import nsroof from this
    checkout, whose bytecode an editable install never writes and which an environment with
    PYTHONDONTWRITEBYTECODE=1 never caches, so each child would compile every module it imports inside
    its timed region (0.13 s of a 2.3 s trace analysis, 0.1 s of a 0.48 s small export, measured) while
    the peers run from compiled site-packages. Up-to-date files are left as they are."""
    compileall.compile_dir(REPO / "nsroof", quiet=1)


def child(code: str, *args: str, cwd: Path = REPO) -> dict[str, Any]:
    """Run `code` in a fresh interpreter (PEAK_RSS defined in it); its last stdout line is a JSON object."""
    package_bytecode()
    out = subprocess.run([sys.executable, "-c", PEAK_RSS + code, *args], capture_output=True, text=True,
                         cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark child failed ({out.returncode}):\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def load_average() -> str:
    """Other processes slow both sides of a comparison: every figure goes with the machine's load."""
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def median(values: list[float]) -> float:
    return statistics.median(values)


def target(work: str, measured: float | None, goal: float, *, at_least: bool, what: str,
           detail: str = "") -> bool:
    """Record one target: `measured` (a ratio) against `goal` (>= when at_least, else <=). None means
    the bench skipped it (missing fixtures or dependency); `detail` says why or gives the raw figures.
    Returns whether it passed (a skip is not a failure)."""
    status = "SKIP" if measured is None else (
        "PASS" if (measured >= goal if at_least else measured <= goal) else "FAIL")
    row = {"work": work, "what": what, "measured": measured, "goal": goal, "at_least": at_least,
           "status": status, "detail": detail}
    sink = os.environ.get(RESULTS_ENV)
    if sink:
        with open(sink, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
    shown = "skipped" if measured is None else _figure(measured)
    print(f"target: {work}: {what} {shown} (target {'>=' if at_least else '<='} {goal:g}) {status}"
          + (f" — {detail}" if detail else ""), flush=True)
    return status != "FAIL"


def _figure(value: float) -> str:
    """Three decimals near the targets (1.03 vs 1.031 matters), whole numbers far off them."""
    return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"


def table(rows: list[dict[str, Any]]) -> str:
    """The one table run.py prints: each target's ratio against its goal, PASS/FAIL/SKIP."""
    head = ("work", "measure", "measured", "target", "result")
    body = [(r["work"], r["what"], "—" if r["measured"] is None else _figure(r["measured"]),
             f"{'>=' if r['at_least'] else '<='} {r['goal']:g}", r["status"]) for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=False)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [line.format(*head), line.format(*("-" * w for w in widths))]
    out += [line.format(*b) for b in body]
    out += [f"  {r['work']}: {r['detail']}" for r in rows if r["detail"] and r["status"] == "SKIP"]
    return "\n".join(out)
