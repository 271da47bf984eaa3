"""The fuzz harness in `make test`: a few hundred deterministic cases (fixed seed) of the repo's own
seeds through the whole analyze path, none of them a crash, hang, partial output or silent wrong
number. `make fuzz` runs many more, over ../shared/fixtures too (tests/fuzz/harness.py)."""

from __future__ import annotations

from tests.fuzz.harness import BAD, run_cases, summary
from tests.fuzz.mutations import make_case, own_seeds

SEED = 2024
CASES = 240


def test_ncu_importers_survive_the_fuzz() -> None:
    seeds = [s for s in own_seeds() if s.kind != "json"]
    # 200,000 blank lines (not a million) keep this under ~20 s; `make fuzz` adds the million
    results = run_cases(list(range(CASES)), seeds, SEED, timeout=10, blank_count=200_000)
    assert not [r for r in results if r.outcome in BAD], summary(results)
    # the mutations reach both sides: reports (benign damage) and one-line errors
    outcomes = {r.outcome for r in results}
    assert {"report", "clean error"} <= outcomes, summary(results)


def test_trace_mutations_give_a_report_or_a_clean_error() -> None:
    # the trace JSON is validated at the door (its declared schema in importers/trace/events.py): wrong
    # types, deep nesting and damaged gzip are one-line errors, never a crash
    seeds = [s for s in own_seeds() if s.kind == "json"]
    results = run_cases(list(range(60)), seeds, SEED, timeout=10)
    assert not [r for r in results if r.outcome in BAD], summary(results)


def test_cases_are_deterministic() -> None:
    seeds = own_seeds()
    a = [make_case(n, seeds, 5) for n in range(30)]
    b = [make_case(n, seeds, 5) for n in range(30)]
    assert a == b and len({c.data for c in a}) > 20
