"""The importer fuzz harness: deterministic mutations (tests/fuzz/mutations.py) of small seeds, each run
through the whole `nsroof analyze` path (nsroof.pipeline.analyze + Report.write) in a worker process,
classified as

  report         a report, and nothing detectably wrong in it
  clean error    one-line NsroofError naming the file, no output left behind
  crash          any other exception (a traceback), an error message that is not one line naming the
                 file, or the worker process dying
  hang           no answer within --timeout seconds (the worker is killed and restarted)
  partial        an error, but a report file (or a temporary one) left behind
  silent wrong   a report holding a value no input can justify: a negative or infinite duration, FLOP or
                 byte count or rate, a memory/compute verdict from a NaN quantity, or a report from an
                 input whose unit was swapped for another dimension's (it must be refused)

    python -m tests.fuzz [--count N] [--seed S] [--jobs J] [--timeout T] [--no-shared] [--save DIR]
    python -m tests.fuzz --case N [--seed S] --save DIR   # one case again, its bytes kept

`make fuzz` runs it with 10,000 cases; tests/fuzz/test_fuzz.py runs a few hundred of the repo's own
seeds with a fixed seed in `make test`. Exit code 1 when any case is a crash, hang, partial or silent
wrong."""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests._paths import REPO

OUTCOMES = ("report", "clean error", "crash", "hang", "partial", "silent wrong")
BAD = ("crash", "hang", "partial", "silent wrong")


# ---------------------------------------------------------------------------------------------
# in the worker
# ---------------------------------------------------------------------------------------------


def _where(exc: BaseException) -> str:
    """The innermost frame inside nsroof (else the innermost frame) that raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/nsroof/" in f.filename]
    f = (ours or frames)[-1] if frames else None
    return f"{Path(f.filename).name}:{f.lineno} in {f.name}" if f else "?"


def silent_wrong(frame: Any) -> str:
    """What in a report no input can justify ('' when nothing)."""
    import numpy as np

    for col in ("duration_s", "flops", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "bytes",
                "achieved_flop_per_s", "achieved_bytes_per_s", "time_floor_s", "peak_flop_per_s",
                "bandwidth_bytes_per_s"):
        if col not in frame.columns:
            continue
        v = frame[col].to_numpy(dtype=np.float64, na_value=np.nan)
        bad = np.isinf(v) | (v < 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return f"{col} = {v[i]!r} (kernel {frame['kernel_id'].iloc[i]}, level {frame['level'].iloc[i]})"
    judged = frame["bound"].isin(["memory", "compute"]).to_numpy()
    for col in ("flops", "bytes", "intensity", "ridge"):  # what a verdict needs (not the duration)
        v = frame[col].to_numpy(dtype=np.float64, na_value=np.nan)
        bad = judged & np.isnan(v)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return f"bound {frame['bound'].iloc[i]!r} with {col} NaN (kernel {frame['kernel_id'].iloc[i]})"
    return ""


def evaluate(path: Path, out: Path, expect_error: bool) -> dict[str, str]:
    from nsroof import pipeline
    from nsroof.errors import NsroofError

    try:
        report = pipeline.analyze([path])
        report.write(out)
    except NsroofError as exc:
        left = sorted(p.name for p in out.parent.iterdir() if p != path)
        message = str(exc)
        if left:
            return {"outcome": "partial", "detail": f"{message[:200]} — left {left}"}
        if "\n" in message or path.name not in message:
            return {"outcome": "crash", "detail": f"unclean error message: {message[:300]!r}"}
        return {"outcome": "clean error", "detail": message[:300]}
    except BaseException as exc:  # noqa: BLE001 — the point: anything else is a crash to report
        if isinstance(exc, KeyboardInterrupt):
            raise
        return {"outcome": "crash", "detail": f"{type(exc).__name__}: {str(exc)[:200]} at {_where(exc)}"}
    wrong = silent_wrong(report.frame)
    if not wrong and expect_error:
        wrong = "a unit of another dimension was accepted"
    if wrong:
        return {"outcome": "silent wrong", "detail": wrong}
    return {"outcome": "report", "detail": f"{len(report.frame)} rows"}


def worker_main() -> int:
    """Answer one JSON line per request line: {"path", "out", "expect_error"} -> {"outcome", "detail"}."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    from nsroof import pipeline  # noqa: F401 — imported once, before the first case's clock

    for line in sys.stdin:
        req = json.loads(line)
        t0 = time.perf_counter()
        result = evaluate(Path(req["path"]), Path(req["out"]), bool(req["expect_error"]))
        result["seconds"] = f"{time.perf_counter() - t0:.3f}"
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
    return 0


# ---------------------------------------------------------------------------------------------
# in the parent
# ---------------------------------------------------------------------------------------------


class Worker:
    """One worker process; restarted after a hang or a death."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        return subprocess.Popen([sys.executable, "-m", "tests.fuzz.harness", "--worker"], cwd=REPO, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True, bufsize=1)

    def run(self, request: dict[str, Any], timeout: float) -> dict[str, str]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
            started = True
        else:
            started = False
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            # a fresh worker first imports nsroof, pandas and pyarrow: not the case's time
            if not sel.select(timeout + (30 if started else 0)):
                self.close()
                return {"outcome": "hang", "detail": f"no answer within {timeout:g} s"}
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            self.proc = None
            return {"outcome": "crash", "detail": f"the worker died (exit code {code})"}
        answer: dict[str, str] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@dataclass
class Result:
    number: int
    seed: str
    mutation: str
    outcome: str
    detail: str
    seconds: float


def run_cases(numbers: list[int], seeds: list[Any], seed: int, *, jobs: int = 1, timeout: float = 10.0,
              blank_count: int = 1_000_000, save: Path | None = None,
              progress: bool = False) -> list[Result]:
    from tests.fuzz.mutations import make_case

    local = threading.local()
    workers: list[Worker] = []
    lock = threading.Lock()
    done: list[Result] = []
    root = Path(tempfile.mkdtemp(prefix="nsroof-fuzz-"))

    def one(number: int) -> Result:
        if not hasattr(local, "worker"):
            local.worker = Worker()
            with lock:
                workers.append(local.worker)
        case = make_case(number, seeds, seed, blank_count=blank_count)
        folder = root / f"case-{number}"
        folder.mkdir()
        path = folder / f"input{case.suffix}"
        path.write_bytes(case.data)
        t0 = time.perf_counter()
        answer = local.worker.run({"path": str(path), "out": str(folder / "report.parquet"),
                                   "expect_error": case.expect_error}, timeout)
        result = Result(number, case.seed, case.mutation, answer["outcome"], answer["detail"],
                        float(answer.get("seconds", time.perf_counter() - t0)))
        if save is not None and (result.outcome in BAD or len(numbers) == 1):
            save.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, save / f"case-{number}-{case.mutation}{case.suffix}")
        shutil.rmtree(folder, ignore_errors=True)
        with lock:
            done.append(result)
            if progress and len(done) % 250 == 0:
                counts = Counter(r.outcome for r in done)
                print(f"  {len(done)}/{len(numbers)}: "
                      + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
        return result

    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(one, numbers))
    finally:
        for w in workers:
            w.close()
        shutil.rmtree(root, ignore_errors=True)
    return results


def summary(results: list[Result]) -> str:
    counts = Counter(r.outcome for r in results)
    lines = [f"{len(results)} cases: " + ", ".join(f"{o} {counts.get(o, 0)}" for o in OUTCOMES)]
    by_mutation: dict[str, Counter[str]] = defaultdict(Counter)
    for r in results:
        by_mutation[r.mutation.split("+")[0]][r.outcome] += 1
    for m in sorted(by_mutation):
        c = by_mutation[m]
        lines.append(f"  {m:<18} " + ", ".join(f"{o} {c[o]}" for o in OUTCOMES if c[o]))
    slow = sorted(results, key=lambda r: r.seconds, reverse=True)[:3]
    lines.append("slowest: " + "; ".join(f"case {r.number} ({r.mutation} of {r.seed}) {r.seconds:.2f} s"
                                         for r in slow))
    seen: dict[tuple[str, str], Result] = {}
    for r in results:
        if r.outcome in BAD:
            seen.setdefault((r.outcome,
                             r.detail.split(" at ")[-1] if r.outcome == "crash" else r.detail[:60]), r)
    for (outcome, _), r in sorted(seen.items()):
        lines.append(f"{outcome.upper()}: case {r.number} ({r.mutation} of {r.seed}): {r.detail}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.splitlines()[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, default=1000, help="cases to run (default 1000)")
    ap.add_argument("--seed", type=int, default=1, help="the mutation seed (default 1)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds before a case counts as a hang")
    ap.add_argument("--no-shared", action="store_true",
                    help="the repo's own seeds only, not ../shared/fixtures")
    ap.add_argument("--blank-count", type=int, default=1_000_000,
                    help="blank lines the blank_lines mutation adds")
    ap.add_argument("--save", type=Path, help="keep the bytes of every bad case (or of --case) here")
    ap.add_argument("--case", type=int, help="run this one case number")
    args = ap.parse_args(argv)
    if args.worker:
        return worker_main()
    from tests.fuzz.mutations import own_seeds, shared_seeds

    seeds = own_seeds() + ([] if args.no_shared else shared_seeds())
    numbers = [args.case] if args.case is not None else list(range(args.count))
    print(f"fuzzing: {len(numbers)} cases, seed {args.seed}, {len(seeds)} seed files, {args.jobs} worker(s), "
          f"timeout {args.timeout:g} s", flush=True)
    t0 = time.perf_counter()
    results = run_cases(numbers, seeds, args.seed, jobs=args.jobs, timeout=args.timeout,
                        blank_count=args.blank_count, save=args.save, progress=True)
    print(summary(results))
    print(f"took {time.perf_counter() - t0:.0f} s")
    if args.case is not None:
        r = results[0]
        print(f"case {r.number}: {r.mutation} of {r.seed}: {r.outcome}: {r.detail}")
    return 1 if any(r.outcome in BAD for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
