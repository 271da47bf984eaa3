"""`nsroof machines [--machine NAME|FILE] [--json]`: the ceilings nsroof classifies against, the ridge
points they imply per precision and memory level, the decode batch that leaves the memory-bound
regime, and the source of every number. Dense figures only; the 2:4-sparse headline is named as
the trap it is."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import click

from nsroof.commands.options import machine_option
from nsroof.schema import LEVELS
from nsroof.units import human_bandwidth, human_tera

if TYPE_CHECKING:
    from nsroof.roofs.machines import Machine

DTYPES: tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")

# what the overview's ridge names
OVERVIEW_ROOFS: tuple[str, ...] = ("peak_flop_per_s.bf16", "peak_flop_per_s.fp16")


def _fmt(value: float, digits: int = 1) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:,.{digits}f}"


def sparse_traps(m: Machine) -> list[str]:
    """One line per dtype whose datasheet headline is the 2:4-sparse figure, bf16/fp16 (the usual
    headline) first."""
    out = []
    order = sorted(m.sparse_peak_flop_per_s,
                   key=lambda d: (d not in ("bf16", "fp16"), DTYPES.index(d) if d in DTYPES else 99))
    for dt in order:
        sparse = m.sparse_peak_flop_per_s[dt]
        dense = m.peak_flop_per_s.get(dt)
        if dense:
            out.append(f"{dt}: the {human_tera(sparse)} TFLOP/s headline is 2:4 structured sparsity "
                       f"({sparse / dense:.2g}× dense); nsroof uses the dense {human_tera(dense)} TFLOP/s")
    return out


def machine_json(m: Machine) -> dict[str, Any]:
    from nsroof.costs.ledger.core import jsonable
    from nsroof.roofs import ledger_analysis

    table = ledger_analysis.decode_batch_table(m)
    d = m.to_dict()
    d["label"] = m.label
    d["ridges"] = {roof: {lvl: jsonable(v) for lvl, v in by_level.items()}
                   for roof, by_level in ledger_analysis.ridge_table(m).items()}
    d["decode_batch_to_leave_memory_bound"] = {
        "roof": table["roof"], "ridge": jsonable(table["ridge"]),
        "batch": {k: jsonable(v) for k, v in table["batch"].items()},
        "formula": "batch = ridge · weight bytes / 2  (I = 2·batch/bytes; Williams et al., CACM 2009)",
    }
    d["sparse_trap"] = sparse_traps(m)
    return d


def overview(profiles: list[Machine]) -> str:
    from nsroof.roofs import ledger_analysis
    from nsroof.roofs.machines import family_names

    head = (f"{'machine':<18}" + "".join(f"{d.upper():>8}" for d in DTYPES[:6])
            + f"{'DRAM':>12}{'L2':>12}{'L1':>12}" + f"{'ridge':>8}   decode batch bf16 / fp16 / fp8 / fp32")
    lines = [("Dense peaks in TFLOP/s (tensor cores where they serve the dtype) and bandwidths at the boost "
              "clock (an"),
             ("export that records its clocks gets them at those clocks); ridge = dense bf16 (else fp16) "
              "peak / DRAM"),
             ("bandwidth in FLOP/byte; decode batch = ridge · weight bytes / 2, the batch that leaves the "
              "memory-bound regime."),
             "", head, "-" * len(head)]
    traps: list[str] = []
    no_half: list[str] = []
    for m in profiles:
        table = ledger_analysis.decode_batch_table(m)
        ridge = table["ridge"]
        batches = [table["batch"][d] for d in ("bf16", "fp16", "fp8", "fp32")]
        if table["roof"] not in OVERVIEW_ROOFS:
            # decode_batch_table falls back to another roof (fp32 for CPUs, named in --machine/--json);
            # under this header's "bf16 (else fp16)" label that number would claim the wrong dtype
            ridge, batches = math.nan, [math.nan] * len(batches)
            no_half.append(f"  {m.name}: no dense bf16 or fp16 figure; "
                           f"`nsroof machines --machine '{m.name}'` "
                           f"gives the decode table at its {table['roof']} roof, named as such")
        batch = " / ".join(_fmt(b, 0) for b in batches)
        lines.append(f"{m.name:<18}"
                     + "".join(f"{human_tera(m.peak_flop_per_s.get(d)):>8}" for d in DTYPES[:6])
                     + f"{human_bandwidth(m.bandwidth_bytes_per_s.get('dram')):>12}"
                     + f"{human_bandwidth(m.bandwidth_bytes_per_s.get('l2')):>12}"
                     + f"{human_bandwidth(m.bandwidth_bytes_per_s.get('l1')):>12}"
                     + f"{_fmt(ridge, 0):>8}   {batch}")
        traps += [f"  {m.name} {t}" for t in sparse_traps(m)[:1]]
    if no_half:
        lines += ["", "— under ridge and decode batch: no dense bf16 or fp16 peak to take them from.",
                  *no_half]
    why_not = [f"  {m.name}: {note}" for m in profiles for note in m.notes
               if note.startswith(("no L2", "no L1")) and not {"l2", "l1"} <= set(m.bandwidth_bytes_per_s)]
    if why_not:
        lines += ["", "— under L2 or L1: no cache roof, and why:", *why_not]
    if traps:
        lines += ["",
                  ("The 2:4-sparse trap: datasheet headlines often double the dense rate with structured "
                   "sparsity,"),
                  ("which a dense GEMM never reaches. nsroof keeps them apart and never uses them for dense "
                   "work:"),
                  *traps]
    families = family_names()
    if families:
        lines += ["",
                  ("Family names, refused by --machine as ambiguous (the board decides the peaks; pass an "
                   "entry):"),
                  *[f"  {w}: {', '.join(names)}" for w, names in families.items()]]
    lines += ["", "Each number's source: nsroof machines --machine NAME (or --json)."]
    return "\n".join(lines)


def _per_cycle_lines(m: Machine) -> list[str]:
    if not m.sm_count or not m.clocks_hz.get("boost"):
        return ["  no SM count or boost clock: ceilings stay at the datasheet figures whatever clock an "
                "export recorded"]
    clocks = ", ".join(f"{k} {v / 1e6:,.0f} MHz" for k, v in m.clocks_hz.items())
    out = [f"  {m.sm_count} SMs; clocks: {clocks}"]
    for key in ("simt_flop_per_s.fp32", "simt_flop_per_s.fp64", "peak_flop_per_s.fp16",
                "peak_flop_per_s.bf16"):
        table, dtype = key.split(".")
        value = m.flop_per_cycle_per_sm(table, dtype)
        if value == value:
            out.append(f"  {key:<26}{value:>10,.0f} FLOP/cycle/SM  (peak / (SMs × clock))")
    for level, what in (("dram", "B per DRAM cycle"), ("l2", "B per L2 cycle"), ("l1", "B per SM per cycle")):
        if level in m.bytes_per_cycle:
            out.append(f"  bytes_per_cycle.{level:<10}{m.bytes_per_cycle[level]:>10,.0f} {what}   "
                       f"{m.sources.get(f'bytes_per_cycle.{level}', '')}")
    return out


def detail(m: Machine) -> str:
    from nsroof.roofs import ledger_analysis

    ridges = ledger_analysis.ridge_table(m)
    levels = [lvl for lvl in LEVELS if lvl in m.bandwidth_bytes_per_s] + [
        lvl for lvl in m.bandwidth_bytes_per_s if lvl not in LEVELS]
    lines = [f"{m.name} ({m.label}" + (f"; aliases {', '.join(m.aliases)}" if m.aliases else "") + ")"]
    if m.architecture or m.cc:
        lines.append(f"architecture {m.architecture or '?'}, compute capability {m.cc or '?'}")
    lines += ["", "compute roofs and their ridge points (peak / bandwidth, FLOP/byte):",
              f"  {'roof':<26}{'TFLOP/s':>10}" + "".join(f"{'ridge ' + lvl:>13}" for lvl in levels)
              + "   source"]
    for key, by_level in ridges.items():
        rates, dt = key.split(".", 1)
        value = getattr(m, rates)[dt]
        lines.append(f"  {key:<26}{human_tera(value):>10}"
                     + "".join(f"{_fmt(by_level[lvl]):>13}" for lvl in levels)
                     + f"   {m.sources.get(key, m.label)}")
    lines += ["", "bandwidth:"]
    for lvl in levels:
        key = f"bandwidth_bytes_per_s.{lvl}"
        lines.append(f"  {lvl:<6}{human_bandwidth(m.bandwidth_bytes_per_s[lvl]):>12}   "
                     f"{m.sources.get(key, m.label)}")
    missing = [lvl for lvl in LEVELS if lvl not in m.bandwidth_bytes_per_s]
    if missing:
        lines.append(f"  {', '.join(missing)}: no published figure; kernels are 'unknown' at that level "
                     "unless the export carries ncu's own ceiling")
    lines += ["", "per cycle (what ncu's ceilings multiply by the profiled clock):"] + _per_cycle_lines(m)
    traps = sparse_traps(m)
    if traps:
        lines += ["", "the 2:4-sparse trap (kept apart, never used for dense work):",
                  *[f"  {t}" for t in traps]]
    table = ledger_analysis.decode_batch_table(m)
    lines += ["", f"decode: batch needed to leave the memory-bound regime (batch = ridge · weight bytes / 2, "
                  f"roof {table['roof']}, ridge {_fmt(table['ridge'])}):",
              "  " + "   ".join(f"{d} {_fmt(v, 0)}" for d, v in table["batch"].items())]
    for note in m.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


@click.command()
@machine_option(when_omitted="every packaged machine (one per line)")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of machine objects.")
def machines(machine: str | None, as_json: bool) -> None:
    """The machine ceilings nsroof knows: dense peak FLOP/s per precision, bandwidth per memory level,
    the ridge points they imply, the decode batch that leaves the memory-bound regime, and each
    number's source."""
    from nsroof.roofs import machines as table

    found = table.resolve(machine)
    profiles = [found] if found is not None else table.all_machines()
    if as_json:
        click.echo(json.dumps([machine_json(m) for m in profiles], indent=2, ensure_ascii=False))
    elif machine:
        click.echo(detail(profiles[0]))
    else:
        click.echo(overview(profiles))
