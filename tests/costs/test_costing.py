"""nsroof.costs.costing: the one way analytic costs enter a file's quantities."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nsroof import importers
from nsroof.costs.costing import costed
from nsroof.counters.quantities import derive
from tests._paths import DATA

NCU_EXPORT = DATA / "ncu" / "details_new.csv"


def test_an_export_without_ops_is_derived_alone() -> None:
    kernels, facts = importers.read(NCU_EXPORT)
    assert facts.ops is None and "op_id" not in kernels.columns
    c = costed(kernels, facts.ops)
    assert c.quantities.equals(derive(kernels))
    assert c.kernels is kernels
    assert c.op_kernels.empty and c.op_quantities.empty and not c.warnings


def test_analyzing_an_ncu_export_imports_neither_the_ledger_nor_the_attribution_rule(tmp_path: Path) -> None:
    """The command a user types most often pays for no module only traces need (~70 ms of imports on a
    2-core VM): asserted on what the process imported, not on a time."""
    out = tmp_path / "report.parquet"
    script = ("import json, sys\nfrom nsroof.cli import cli\n"
              f"try:\n    cli.main(['analyze', {str(NCU_EXPORT)!r}, '-o', {str(out)!r}, '-q'])\n"
              "except SystemExit as exc:\n    assert exc.code in (0, None), exc.code\n"
              "print(json.dumps(sorted(m for m in sys.modules if m.startswith('nsroof.'))))\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                         check=True)
    loaded = json.loads(run.stdout.strip().splitlines()[-1])
    assert out.is_file()
    assert "nsroof.counters.quantities" in loaded and "nsroof.costs.costing" in loaded  # the analysis ran
    assert not [m for m in loaded if m.startswith(("nsroof.costs.ledger", "nsroof.costs.attribution",
                                                   "nsroof.costs.op_table",
                                                   "nsroof.costs.analytic_fill"))], loaded
