"""`nsroof ledger OP [--PARAM VALUE ...]`: what an operator has to do (FLOPs, compulsory bytes), term by
term, and where that puts it against a machine's roofs. The shape options are the formula's own
parameters (`nsroof ledger` alone lists them), so the CLI never repeats the registry."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from nsroof.commands.options import level_option, machine_option
from nsroof.roofs.ledger_tables import (
    SWEEP_DEFAULTS,
    SWEEP_OPS,
    analysis_json,
    formula_table,
    seed_table,
    sweep,
    to_json,
)
from nsroof.roofs.machines import LEVELS
from nsroof.units import human_count as count  # exact integers with separators
from nsroof.units import human_si, human_time

if TYPE_CHECKING:
    from nsroof.costs.ledger import Formula
    from nsroof.roofs.ledger_analysis import Analysis


# --------------------------------------------------------------------------- number formatting


def ratio(value: float) -> str:
    """Intensities and ridges: two decimals (315.08, 0.9988 -> 1.00), like the seeds' tables."""
    if value is None or math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "inf"
    return f"{value:,.2f}" if abs(value) >= 0.01 else f"{value:.3g}"


def si(value: float, unit: str) -> str:
    """Rates and sizes on the ledger's lines: 4 significant digits under an SI prefix, 'n/a' when unknown."""
    return human_si(value, unit, digits=4, missing="n/a")


def duration(seconds: float) -> str:
    """Times on the ledger's lines: 3 decimals, as the arithmetic is shown."""
    return human_time(seconds, decimals=3)


# --------------------------------------------------------------------------- shape options


def parse_shape(formula: Formula, tokens: Sequence[str]) -> dict[str, Any]:
    """`--m 4096 --dtype fp16 --causal --no-fused --block-m=64` -> {m: '4096', ...}, uncoerced
    (Formula.bind checks and converts)."""
    from nsroof.costs.ledger import LedgerError

    params = {p.name: p for p in formula.params}
    accepted = ", ".join(f"--{n.replace('_', '-')}" for n in params)
    shape: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--") or token == "--":
            raise LedgerError(f"{formula.name}: unexpected argument {token!r}; options: {accepted}")
        name, eq, inline = token[2:].partition("=")
        key = name.replace("-", "_")
        if key not in params and key.startswith("no_") and key[3:] in params and params[key[3:]].type is bool:
            shape[key[3:]] = False
            i += 1
            continue
        if key not in params:
            raise LedgerError(f"{formula.name}: unknown option --{name}; options: {accepted}")
        if eq:
            shape[key] = inline
            i += 1
        elif params[key].type is bool and (i + 1 >= len(tokens) or tokens[i + 1].startswith("--")):
            shape[key] = True
            i += 1
        elif i + 1 < len(tokens):
            shape[key] = tokens[i + 1]
            i += 2
        else:
            raise LedgerError(f"{formula.name}: --{name} needs a value")
    return shape


# --------------------------------------------------------------------------- text


def render(a: Analysis, source: str) -> str:
    op, t = a.op, a.timing
    lines = [f"{op.label} on {a.machine_name}", f"formula source: {source}", ""]
    lines.append(f"{'term':<34}{'FLOP':>20}{'bytes':>20}  note")
    for term in op.cost.terms:
        lines.append(f"{term.name:<34}{count(term.flops):>20}{count(term.bytes):>20}  {term.note}")
    lines.append("-" * 76)
    lines.append(f"{'TOTAL':<34}{count(op.flops):>20}{count(op.bytes):>20}")
    for note in op.cost.notes:
        lines.append(f"  ({note})")
    lines.append("")
    if op.formula == "attention-traffic":
        lines += _traffic_lines(a)
    lines.append(f"intensity       {ratio(t.intensity)} FLOP/byte")
    lines.append(f"roof            {op.roof.key} = {a.peak.key}: {si(a.peak.value, 'FLOP/s')}")
    lines.append(f"                source: {a.peak.source or 'not in this machine profile'}")
    lines.append(f"bandwidth       {a.level}: {si(a.bandwidth.value, 'B/s')}")
    same = a.bandwidth.source and a.bandwidth.source == a.peak.source
    lines.append("                source: "
                 f"{'(as above)' if same else a.bandwidth.source or 'not in this machine profile'}")
    lines.append(f"ridge           {ratio(a.ridge)} FLOP/byte")
    lines.append(f"memory time     {duration(t.memory_time_s)}")
    lines.append(f"compute time    {duration(t.compute_time_s)}")
    lines.append(f"SOL time (max)  {duration(t.sol_time_s)}  -> {_bound(t.bound)}"
                 + (" (within 10% of the ridge)" if a.regime == "at ridge" else ""))
    for name, vt in a.variants.items():
        if op.formula == "attention-traffic":
            continue
        lines.append(f"{name + ' case':<16}{count(op.variants[name].bytes)} bytes, "
                     f"I = {ratio(vt.intensity)}: "
                     f"memory {duration(vt.memory_time_s)}, SOL {duration(vt.sol_time_s)} -> "
                     f"{_bound(vt.bound)} ({'; '.join(op.variants[name].notes)})")
    if a.missing:
        lines.append(f"missing         {', '.join(a.missing)} (times are n/a without them)")
        if not a.peak.known and a.op.roof.kind == "matmul":
            lines.append("                this machine's matmul roofs: "
                         f"{', '.join(a.machine_peaks) or 'none'}; "
                         "choose one with --dtype (decode: --compute-dtype)")
    if op.formula == "decode":
        d = a.derived
        lines += [
            "",
            f"decode step     {duration(d['step_s'])}: {count(round(d['tokens_per_s'], 1))} tokens/s, "
            f"MFU {d['mfu'] * 100:.1f}%",
            f"batch to leave the memory-bound regime: {count(round(d['batch_to_leave_memory_bound'], 1))} "
            f"(ridge · {op.dtype} bytes / 2)",
        ]
        if d["kv_cache_bytes"]:
            lines.append(f"KV cache        {count(d['kv_cache_bytes'])} bytes "
                         f"({si(d['kv_cache_bytes'], 'B')})")
    if a.other_roofs:
        lines += ["", "the other roofs, for contrast:"]
        for r in a.other_roofs:
            lines.append(f"  {r.key:<26}{si(r.peak_flop_per_s, 'FLOP/s'):>16}  ridge {ratio(r.ridge):>8}  "
                         f"-> {_bound(r.bound)} under this roof")
    return "\n".join(lines)


def _bound(bound: str) -> str:
    return "bound unknown" if bound == "unknown" else f"{bound}-bound"


def _traffic_lines(a: Analysis) -> list[str]:
    op = a.op
    naive, tiled = op.variants["naive"], op.cost
    f = op.facts
    tiled_items = {t.name: t.elements for t in tiled.terms if t.elements is not None}
    lines = [f"HBM elements moved (q blocks {count(f['q_blocks'])}, kv blocks {count(f['kv_blocks'])}):",
             f"{'item':<12}{'naive':>18}{'tiled':>18}"]
    for term in naive.terms:
        if term.elements is None:
            continue
        lines.append(f"{term.name:<12}{count(term.elements):>18}{count(tiled_items.get(term.name, 0)):>18}")
    lines += [
        f"{'total':<12}{count(naive.elements):>18}{count(tiled.elements):>18}",
        f"{'bytes':<12}{count(naive.bytes):>18}{count(tiled.bytes):>18}",
        f"ratio naive/tiled = {f['ratio_naive_over_tiled']:.2f}x",
        f"asymptotic: naive ~ 4·Sq·Skv + 2·(Sq+Skv)·d = {count(f['naive_asymptotic_elements'])}; "
        f"tiled ~ 2·ceil(Sq/block_m)·Skv·d = {count(f['tiled_asymptotic_elements'])}",
    ]
    if op.shape["sq"] == op.shape["skv"]:
        lines.append(f"prefill crossover: tiled wins while 2·(N/block_m)·N·d < 4·N·N, i.e. block_m > d/2 = "
                     f"{count(f['crossover_block_m'])} (block_m = {op.shape['block_m']})")
    lines += ["(element counts from a model, not measurements)", "",
              "times below are for the tiled formulation; the naive one's memory time: "
              + duration(a.variants["naive"].memory_time_s), ""]
    return lines


# ------------------------------------------------------------------- sweeps (computed in roofs.ledger_tables)


def sweep_text(name: str, data: dict[str, Any]) -> str:
    if name == "decode":
        return _decode_text(data)
    if name == "attention-traffic":
        return _traffic_text(data)
    return _attention_text(data)


def _decode_text(data: dict[str, Any]) -> str:
    text = [f"Dense decode, {count(data['params'])} params, {data['dtype']} weights, on {data['machine']} "
            f"(roof {data['roof']})",
            f"{'batch':>7}{'I (F/B)':>10}{'step ms':>10}{'tok/s':>12}{'MFU':>8}   regime"]
    for r in data["rows"]:
        text.append(f"{r['batch']:>7}{r['intensity']:>10.1f}{r['step_s'] * 1e3:>10.3f}"
                    f"{r['tokens_per_s']:>12.0f}{r['mfu'] * 100:>7.1f}%   {r['regime']}")
    return "\n".join(text)


def _traffic_text(data: dict[str, Any]) -> str:
    text = []
    for regime in ("prefill", "decode"):
        text.append(
            f"{'prefill-like: Sq = Skv = N' if regime == 'prefill' else 'decode-like: Sq = 1, Skv = N'}"
            f" (block_m = {data['block_m']}, d = {data['d']})")
        text.append(f"{'N':>8}{'naive':>18}{'tiled':>18}{'ratio':>9}")
        for r in data[regime]:
            text.append(f"{r['n']:>8}{count(r['naive']):>18}{count(r['tiled']):>18}{r['ratio']:>8.2f}x")
        text.append("")
    return "\n".join(text).rstrip()


def _attention_text(data: dict[str, Any]) -> str:
    text = []
    for regime in ("prefill", "decode"):
        text.append(f"fused attention, {regime} "
                    f"({'Sq = Skv = N' if regime == 'prefill' else 'Sq = 1, Skv = N'}), {data['machine']}")
        text.append(f"{'N':>8}{'FLOP':>22}{'bytes':>18}{'I':>10}{'SOL':>14}  bound")
        for r in data[regime]:
            text.append(f"{r['n']:>8}{count(r['flops']):>22}{count(r['bytes']):>18}{r['intensity']:>10.1f}"
                        f"{duration(r['sol_time_s']):>14}  {r['bound']}")
        text.append("")
    return "\n".join(text).rstrip()


def seed_table_text(data: dict[str, Any]) -> str:
    text = [f"operator table on {data['machine']} (each operator under its own roof; {data['level']} "
            "bandwidth)",
            f"{'operator':<34}{'roof':>13}{'AI':>10}{'bound':>9}{'memory':>13}{'compute':>13}{'SOL':>13}"]
    for r in data["rows"]:
        text.append(f"{r['operator']:<34}{r['roof']:>13}{r['intensity']:>10.2f}{r['bound']:>9}"
                    f"{duration(r['memory_time_s']):>13}{duration(r['compute_time_s']):>13}"
                    f"{duration(r['sol_time_s']):>13}")
    return "\n".join(text)


def formula_list() -> str:
    from nsroof.costs import ledger

    lines = ["Formulas (nsroof ledger OP --PARAM VALUE ...):", ""]
    for f in ledger.formulas():
        lines.append(f"  {f.name:<20}{f.summary}")
        lines.append(f"  {'':<20}{f.signature_text()}")
    lines += ["", f"--sweep: {', '.join(SWEEP_OPS)}, or no OP for the seed operator table."]
    return "\n".join(lines)


# --------------------------------------------------------------------------- the command


class _LedgerCommand(click.Command):
    """`nsroof ledger --help` ends with every formula and its options, read from the registry."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_paragraph()
        for line in formula_list().splitlines():
            formatter.write(line + "\n")


@click.command(cls=_LedgerCommand,
               context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("op", required=False)
@machine_option(when_omitted="the H100 datasheet entry", default="h100-sxm")
@level_option(LEVELS, default="dram", what="Memory level whose bandwidth the bytes are timed at.")
@click.option("--sweep", "do_sweep", is_flag=True,
              help="decode: batch 1…512; attention/attention-traffic: N 512…131072; no OP: the operator "
                   "table.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_context
def ledger(ctx: click.Context, op: str | None, machine: str, level: str, do_sweep: bool,
           as_json: bool) -> None:
    """What operator OP has to do: FLOPs and compulsory bytes term by term, intensity, memory /
    compute / SOL time on a machine, the bound, and the other roofs. Shape options are the formula's
    parameters, e.g. `nsroof ledger gemm --m 4096 --n 4096 --k 4096 --dtype bf16`; run `nsroof ledger`
    alone to list every formula with its options."""
    from nsroof.costs import ledger as lg
    from nsroof.roofs import machines

    if op is not None and op.startswith("-"):  # unknown options are let through, so an option can land here
        raise lg.LedgerError(f"options {' '.join([op, *ctx.args])} need an OP; run `nsroof ledger` to list "
                             "them")
    if op is None and ctx.args:
        raise lg.LedgerError(f"options {' '.join(ctx.args)} need an OP; run `nsroof ledger` to list them")
    if op is None and not do_sweep:
        click.echo(_json(formula_table()) if as_json else formula_list())
        return
    m = machines.load(machine)
    if op is None:
        data = seed_table(m, level)
        click.echo(_json(data) if as_json else seed_table_text(data))
        return
    formula = lg.get(op)
    raw = parse_shape(formula, ctx.args)
    if do_sweep:
        if formula.name not in SWEEP_OPS:
            raise lg.LedgerError(f"--sweep is available for {', '.join(SWEEP_OPS)} (or with no OP), "
                                 f"not {formula.name}")
        data = sweep(formula.name, formula.bind(SWEEP_DEFAULTS[formula.name] | raw), m, level)
        click.echo(_json(data) if as_json else sweep_text(formula.name, data))
        return
    from nsroof.roofs.ledger_analysis import analyze

    analysis = analyze(formula.fn(**formula.bind(raw)), m, level=level)
    click.echo(_json(analysis_json(analysis)) if as_json else _fitted(render(analysis, formula.source)))


def _fitted(text: str) -> str:
    """The ledger's lines wrapped to the terminal (long sources and notes), as analyze's summary is."""
    from nsroof.report.summary import fit_line, terminal_width

    width = terminal_width()
    return "\n".join(fit_line(line, width) for line in text.splitlines())


def _json(data: Any) -> str:
    return json.dumps(to_json(data), indent=2, ensure_ascii=False)
