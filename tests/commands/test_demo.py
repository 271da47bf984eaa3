"""`nsroof demo` smoke test: the tiny transformer profiles on the CPU and the summary names its ops."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nsroof.cli import cli

pytest.importorskip("torch")



def test_demo_profiles_the_tiny_transformer(cpu_machine_json: Path, tmp_path: Path) -> None:
    out = tmp_path / "demo.parquet"
    # An explicit machine: the default measures this CPU first (about a minute).
    result = CliRunner().invoke(cli, ["demo", "--steps", "1", "--warmup", "0", "--machine",
                                      str(cpu_machine_json), "-o", str(out)])
    assert result.exit_code == 0, result.output
    for op in ("aten::embedding", "aten::scaled_dot_product_attention", "aten::layer_norm", "aten::linear"):
        assert op in result.output or op in _ops(out)
    assert "Coverage:" in result.output and "Steps: 1 marked (optimizer steps)" in result.output

    from nsroof.report.parquet import load, read_metadata

    report = load(out)
    assert set(report["source"].astype(str)) == {"demo.trace.json.gz"}  # built from the kept chrome trace
    assert (tmp_path / "demo.trace.json.gz").is_file()
    assert read_metadata(out)["demo"] is True
    # every module of the model shows up in the rows
    modules = set(report["module"].astype(str))
    assert {"TinyTransformer.embed", "TinyTransformer.blocks.0.attn", "TinyTransformer.head"} <= modules
    # analytic costs cover most of the profiled time
    covered = report.loc[report["flops"].notna(), "duration_s"].sum() / report["duration_s"].sum()
    assert covered > 0.5


def _ops(path: Path) -> set[str]:
    from nsroof.report.parquet import load

    return set(load(path)["op"].astype(str)) if path.exists() else set()


def test_demo_also_analyzes_the_packaged_example_export(
    data_dir: Path, cpu_machine_json: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nsroof.commands import demo

    # Stand in for nsroof/data/examples/example_details.csv with this repo's small raw-page export.
    example = data_dir / "collectors" / "ncu_raw_nvtx.csv"
    monkeypatch.setattr(demo, "EXAMPLE_EXPORT", example)
    out = tmp_path / "demo.parquet"
    result = CliRunner().invoke(cli, ["demo", "--steps", "1", "--warmup", "0", "--machine",
                                      str(cpu_machine_json), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "The packaged Nsight Compute example (ncu_raw_nvtx.csv)" in result.output
    assert "ampere_sgemm_128x64_nn" in result.output
    assert (tmp_path / "demo-ncu-example.parquet").exists()


def test_demo_output_has_no_kineto_noise(cpu_machine_json: Path, repo: Path, tmp_path: Path) -> None:
    # kineto writes `USDT: … profiler_start/stop` to fd 2 from C++ on every profiler start and stop; a real
    # process is the only place they show (click's runner never sees fd 2)
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "nsroof", "demo", "--steps", "1", "--warmup", "0",
                           "--machine", str(cpu_machine_json), "-o", str(tmp_path / "d.parquet")],
                          cwd=repo, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Coverage:" in proc.stdout
    assert "USDT" not in proc.stderr + proc.stdout
