"""What a dataset run did: the result object, `_nsroof_dataset.json` (one record per input ever
written into the folder) and the terminal summary."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from nsroof.dataset.discover import Failure, Skipped
from nsroof.dataset.task import Outcome, ops_dir


@dataclass
class DatasetResult:
    out_dir: str
    outcomes: list[Outcome]
    failures: list[Failure]  # inputs whose analysis failed
    executor: str
    jobs: int
    wall_s: float
    summary_path: str = ""
    skipped: list[Skipped] = field(default_factory=list)  # export-named files that hold none of our formats

    @property
    def ok(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.ok]

    @property
    def exit_code(self) -> int:
        return 1 if self.failures else 0

    def summary(self) -> str:
        return render_summary(self)


def write_summary(result: DatasetResult) -> str:
    """`_nsroof_dataset.json`: one record per input ever written into the dataset (a later run
    updates the records of the inputs it analyzed and keeps the others)."""
    from nsroof._version import __version__
    from nsroof.report.parquet import SUMMARY_FILE, filesystem
    from nsroof.schema import SCHEMA_VERSION

    fs, root = filesystem(result.out_dir)
    path = f"{root}/{SUMMARY_FILE}"
    previous: dict[str, Any] = {}
    try:
        with fs.open_input_stream(path) as fh:
            previous = json.loads(fh.read().decode("utf-8"))
    except (OSError, FileNotFoundError, ValueError):
        previous = {}

    def key(r: dict[str, Any]) -> str:
        return f"{r.get('source')}|{r.get('rank')}"

    records = {key(r): r for r in previous.get("inputs", []) if isinstance(r, dict) and "source" in r}
    for o in result.outcomes:
        rec = {k: v for k, v in asdict(o).items() if k not in ("top",)}
        old = records.get(key(rec))
        if not o.ok and old and old.get("ok"):
            # a refused or failed re-run leaves the earlier partitions in place: keep their record
            rec = dict(old, last_error=o.error)
        records[key(rec)] = rec
    summary = {
        "nsroof_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "layout": "host-<host>/rank-<rank>/source-<source>/part-0.parquet (folder names only; host, rank and "
                  "source are file columns)",
        "inputs": sorted(records.values(), key=lambda r: (str(r["source"]), str(r.get("rank")))),
        "skipped": [asdict(sk) for sk in result.skipped],
        "last_run": {"executor": result.executor, "jobs": result.jobs, "wall_s": round(result.wall_s, 3),
                     "inputs": len(result.outcomes), "failed": len(result.failures)},
    }
    text = json.dumps(summary, indent=1, default=str) + "\n"
    if "://" in result.out_dir:
        with fs.open_output_stream(path) as fh:
            fh.write(text.encode("utf-8"))
    else:
        from nsroof.atomic import atomic_write_text

        atomic_write_text(path, text)
    return path


def render_summary(result: DatasetResult) -> str:
    """The dataset-level summary: what landed where, time by bound per host/rank, the longest kernels
    across all inputs, and every failed input with its one-line error."""
    from nsroof.units import human_time

    ok = result.ok
    lines = [
        f"dataset {result.out_dir}: {len(ok)} of {len(ok) + len(result.failures)} inputs analyzed"
        f" ({result.executor}{f', -j {result.jobs}' if result.executor == 'local' else ''}, "
        f"{result.wall_s:.1f} s)",
    ]
    if ok:
        kernels = sum(o.kernels for o in ok)
        rows = sum(o.rows for o in ok)
        parts = sum(len(o.partitions) for o in ok)
        lines.append(f"  {kernels} kernels, {rows} report rows, {parts} part files (host/rank/source)")
        op_rows = sum(o.op_rows for o in ok)
        if op_rows:
            lines.append(f"  {op_rows} op-level rows (the traces' costed ops) in {ops_dir(result.out_dir)}")
        groups: dict[tuple[str, str], list[Outcome]] = {}
        for o in ok:
            # a file spanning several hosts is one group, named by all of them (never counted twice)
            h = ",".join(x or "?" for x in o.host) or "?"
            groups.setdefault((h, "?" if o.rank is None else str(o.rank)), []).append(o)
        lines.append("")
        lines.append(f"  {'host':<24} {'rank':>5} {'inputs':>6} {'kernels':>8} {'kernel time':>12} "
                     f"{'memory-bound':>13} {'compute-bound':>14} {'unknown':>8}")
        for (h, r), os_ in sorted(groups.items()):
            dur = sum(o.duration_s for o in os_)
            mem = sum(o.memory_bound_s for o in os_)
            comp = sum(o.compute_bound_s for o in os_)
            unk = sum(o.unknown_bound_s for o in os_)
            lines.append(
                f"  {h[:24]:<24} {r:>5} {len(os_):>6} {sum(o.kernels for o in os_):>8} {human_time(dur):>12}"
                f" {_pct(mem, dur):>13} {_pct(comp, dur):>14} {_pct(unk, dur):>8}"
            )
        summed, busy = sum(o.duration_s for o in ok), sum(o.busy_s for o in ok)
        # every input timed its kernels' starts, and they overlapped
        if busy == busy and 0 < busy < 0.995 * summed:
            lines.append(f"  kernel time is summed over streams; the GPUs were busy {human_time(busy)} "
                         "(kernels overlapping on streams counted once)")
        top = sorted((t for o in ok for t in o.top), key=lambda t: -t["duration_s"])[:5]
        if top:
            lines.append("")
            lines.append("  longest kernels (DRAM level):")
            for t in top:
                where = f" [{t['nvtx_path']}]" if t["nvtx_path"] else ""
                lines.append(f"    {human_time(t['duration_s']):>10}  {t['bound'] or 'unknown':8} "
                             f"{t['function'][:50]}{where}  ({t['source']})")
        unknown = [o.source for o in ok if o.rank is None]
        if unknown:
            lines.append("")
            lines.append(f"  rank unknown for {len(unknown)} input(s) (rank is null): "
                         "name them with rank<N> or pass --name-template 'prof_%q{RANK}'")
        blind = [o for o in ok if o.duration_s > 0 and o.unknown_bound_s >= o.duration_s]
        if blind:
            lines.append(f"  no kernel could be classified in {len(blind)} input(s) — the 'missing' column "
                         "names the absent counters or roofs; --machine NAME supplies roofs an export lacks")
        warned = sum(len(o.warnings) for o in ok)
        if warned:
            lines.append(f"  {warned} warning(s) recorded in the part files' metadata")
    if result.failures:
        lines.append("")
        lines.append(f"  FAILED ({len(result.failures)}):")
        for f in result.failures:
            text = f.error if f.error.startswith(f.input) else f"{f.input}: {f.error}"
            lines.append(f"    {text}")
    if result.skipped:
        lines.append("")
        lines.append(f"  skipped ({len(result.skipped)}), named like exports but holding none of nsroof's "
                     "formats (name one explicitly to analyze it anyway):")
        for sk in result.skipped:
            lines.append(f"    {sk.input}")
    lines.append("")
    lines.append(f"  load: pandas.read_parquet({result.out_dir!r}) or nsroof.load({result.out_dir!r}, "
                 "filters=[('rank', '=', 0)])")
    return "\n".join(lines)


def _pct(part: float, whole: float) -> str:
    if not whole > 0:
        return "—"
    share = 100 * part / whole
    if 0 < share < 1:
        return "<1 %"
    return ">99 %" if 99 < share < 100 else f"{share:.0f} %"
