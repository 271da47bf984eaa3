"""No output of any command names the development tree (the shared fixtures, the seed documents): a user
has neither. Sources cite datasheets, papers and NVIDIA docs instead."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from nsroof.cli import cli
from tests._paths import REPO

EXAMPLE = REPO / "nsroof" / "data" / "examples" / "example_details.csv"
DEV_PATH = re.compile(r"shared/|seeds/|\.py\.txt")


def _out(*args: str) -> str:
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code == 0, r.output
    return r.output


def test_machines_and_their_sources() -> None:
    texts = [_out("machines"), _out("machines", "--json")]
    names = [m["name"] for m in json.loads(texts[1])]
    assert len(names) > 20
    texts += [_out("machines", "--machine", name) for name in names]
    leaks = {m.group(0) for t in texts for m in DEV_PATH.finditer(t)}
    assert not leaks


def test_every_ledger_formula_and_its_source() -> None:
    from nsroof.costs.ledger import registry

    texts = [_out("ledger"), _out("ledger", "--sweep"),
             _out("ledger", "gemm", "--m", "64", "--n", "64", "--k", "64"),
             _out("ledger", "gemm", "--m", "64", "--n", "64", "--k", "64", "--json")]
    sources = [f.source for f in registry.formulas()]
    assert sources and not [s for s in sources if DEV_PATH.search(s)]
    assert not [t for t in texts if DEV_PATH.search(t)]


def test_analyze_and_its_help(tmp_path: Path) -> None:
    texts = [_out("analyze", str(EXAMPLE), "-o", str(tmp_path / "r.parquet")), _out("--help")]
    texts += [_out(name, "--help") for name in ("analyze", "plot", "report", "compare", "machines", "ledger")]
    assert not [t for t in texts if DEV_PATH.search(t)]
