"""Many inputs into one dataset folder (nsroof.dataset): discovery by content, rank/host inference,
part files, overwrite protection, failed inputs listed while the others land, inputs that name
nothing refused before anything is written, the local pool and a Dask LocalCluster giving the same
rows, and a run over the shared real exports. Every Parquet reader: tests/dataset/test_dataset_readers.py."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from nsroof import pipeline
from nsroof.dataset import analyze_many, discover, identity, plan
from nsroof.dataset.results import render_summary
from nsroof.errors import InputError
from nsroof.importers import sniff
from nsroof.report import parquet
from tests._paths import DATA

A100 = "NVIDIA A100-SXM4-40GB"
FLOP_OPS = ("fadd", "fmul", "ffma", "dadd", "dmul", "dfma", "hadd", "hmul", "hfma")


def raw_csv(kernels: list[tuple[str, int, int, int]], *, host: str = "nodeA", pid: int = 4242,
            device: str = A100) -> str:
    """A small ncu raw-page export (header, units row, one row per launch), C locale.
    kernels: (name, dram bytes, duration ns, FFMA thread instructions)."""
    cols = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
            "Grid Size", "Device", "CC", "device__attribute_display_name", "dram__bytes.sum",
            "gpu__time_duration.sum", "lts__t_bytes.sum", "l1tex__t_bytes.sum",
            *(f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in FLOP_OPS)]
    units = ["", "", "", "", "", "", "", "", "", "", "", "", "byte", "nsecond", "byte", "byte",
             *(["inst"] * len(FLOP_OPS))]
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(cols)
    w.writerow(units)
    for i, (name, dram, ns, ffma) in enumerate(kernels):
        flops = [ffma if op == "ffma" else 0 for op in FLOP_OPS]
        w.writerow([i, pid, "python", host, name, 1, 7, "(256, 1, 1)", "(1024, 1, 1)", 0, "8.0", device, dram,
                    ns, 2 * dram, 4 * dram, *flops])
    return buf.getvalue()


# One memory-bound and one compute-bound kernel on an A100 40GB (spec roofs: FP32 SIMT 19.5e12,
# DRAM 1.555e12 -> ridge 19.5e12 / 1.555e12 = 12.54 FLOP/byte):
#   axpy: 2.5e8 FFMA x 2 = 5e8 FLOP over 1e9 DRAM bytes -> intensity 0.5  < 12.54 -> memory
#   gemm: 5e10 FFMA x 2 = 1e11 FLOP over 1e8 DRAM bytes -> intensity 1000 > 12.54 -> compute
KERNELS = [("void axpy<float>(float, float const*, float*, int)", 1_000_000_000, 1_000_000, 250_000_000),
           ("gemm_kernel(float*)", 100_000_000, 6_000_000, 50_000_000_000)]


@pytest.fixture()
def inputs(tmp_path: Path) -> Path:
    """A run folder as a 2-host, 4-rank job leaves it, plus things that are not exports."""
    root = tmp_path / "job"
    for rank, host in enumerate(["nodeA", "nodeA", "nodeB", "nodeB"]):
        d = root / f"rank{rank}"
        d.mkdir(parents=True)
        (d / "profile.csv").write_text(raw_csv(KERNELS, host=host, pid=1000 + rank))
    (root / "notes").mkdir()
    (root / "notes" / "README.md").write_text("# how we profiled\nncu --set full -o prof_%q{RANK}\n")
    (root / "notes" / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    (root / "old.parquet").write_bytes(b"PAR1" + bytes(64))
    (root / ".hidden.csv").write_text(raw_csv(KERNELS))
    return root


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    for c in out.columns:
        if isinstance(out[c].dtype, pd.CategoricalDtype):
            out[c] = out[c].astype(object)
    return out.sort_values(["source", "kernel_id", "level"], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------- discovery (pure)


def test_directories_recurse_and_pick_exports_by_content(inputs: Path) -> None:
    found = discover([inputs])
    files, failures = found.files, found.failures
    assert [f.relative_to(inputs).as_posix() for f in files] == [f"rank{r}/profile.csv" for r in range(4)]
    assert failures == []


def kind(path: Path) -> str | None:
    """What a folder scan makes of a file: importers.sniff with positive evidence required."""
    try:
        return sniff(path, strict=True)
    except InputError:
        return None


def test_sniff_reads_content_not_extension(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(raw_csv(KERNELS))  # an ncu CSV saved as .txt
    (tmp_path / "b.log").write_text("==PROF== Connected to process 1\n==ERROR== LaunchFailed\n")
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(b'{"schemaVersion": 1, "traceEvents": []}'))
    (tmp_path / "c.json").write_text('{"name": "not a trace"}')
    (tmp_path / "r.ncu-rep").write_bytes(b"NVR\0" + bytes(16))
    (tmp_path / "d.csv").write_text("a,b\n1,2\n")
    kinds = {p.name: kind(p) for p in tmp_path.iterdir()}
    assert kinds == {"a.txt": "ncu-csv", "b.log": "ncu-csv", "t.json.gz": "torch-trace", "c.json": None,
                     "r.ncu-rep": "ncu-rep", "d.csv": None}


def _trace_json(events: int) -> bytes:
    ev = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "ts": i, "dur": 1, "pid": 0, "tid": 7}
          for i in range(events)]
    return json.dumps({"schemaVersion": 1, "deviceProperties": [], "traceEvents": ev}).encode()


def test_damaged_exports_in_a_folder_are_inputs_not_dropped(tmp_path: Path) -> None:
    # a damaged rank must fail loudly, never vanish from the dataset: content sniffing cannot judge
    # these, so a file named like an export is taken and the reader says what is wrong with it
    whole = gzip.compress(_trace_json(20_000))
    (tmp_path / "rank1.pt.trace.json.gz").write_bytes(whole[:1100])  # cut mid-stream (a copy that died)
    (tmp_path / "rank2.ncu-rep").write_bytes(b"\0" * 64)  # no NVR magic
    (tmp_path / "rank3.csv").write_bytes(b"")  # ncu killed before it wrote anything
    (tmp_path / "rank4.json.gz").write_bytes(b"not gzip at all")
    (tmp_path / "rank0.csv").write_text(raw_csv(KERNELS))
    (tmp_path / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(20))  # not export-named: ignored
    found = discover([tmp_path])
    assert sorted(f.name for f in found.files) == ["rank0.csv", "rank1.pt.trace.json.gz", "rank2.ncu-rep",
                                                   "rank3.csv", "rank4.json.gz"]
    assert found.failures == [] and found.skipped == []


def test_an_ncu_text_page_opening_on_its_pid_line_is_an_export(tmp_path: Path) -> None:
    # "[18548] app@host" starts with '[' like a JSON array: it must not be judged as a non-trace JSON
    page = tmp_path / "details.txt"
    page.write_text("[18548] MC_EstimatePi.exe@127.0.0.1\n"
                    "  initRNG(unsigned int) (156160, 1, 1)x(128, 1, 1), "
                    "Context 1, Stream 7, Device 0, CC 8.6\n    Section: GPU Speed Of Light\n")
    assert kind(page) == "ncu-text"  # the same answer the importer dispatch gives: one sniffer
    assert sniff(page) == "ncu-text"
    assert kind(tmp_path / "x") is None  # unreadable: no kind (the folder scan takes it if export-named)
    found = discover([tmp_path])
    assert found.files == [page] and found.skipped == []


def test_export_named_files_that_hold_something_else_are_listed_as_skipped(tmp_path: Path) -> None:
    (tmp_path / "rank0.csv").write_text(raw_csv(KERNELS))
    (tmp_path / "config.json").write_text('{"lr": 0.1}')
    (tmp_path / "losses.csv").write_text("step,loss\n1,0.5\n")
    (tmp_path / "README.md").write_text("# notes\n")  # not export-named: ignored without a word
    found = discover([tmp_path])
    assert [f.name for f in found.files] == ["rank0.csv"] and found.failures == []
    assert [Path(s.input).name for s in found.skipped] == ["config.json", "losses.csv"]
    assert all("not an ncu CSV, ncu text page, .ncu-rep or torch trace" in s.reason for s in found.skipped)
    result = analyze_many([tmp_path], tmp_path / "ds", jobs=1)
    assert result.exit_code == 0  # skipped is not failed, but it is said
    text = result.summary()
    assert "skipped (2)" in text and str(tmp_path / "config.json") in text and "README.md" not in text
    recorded = json.loads((tmp_path / "ds" / parquet.SUMMARY_FILE).read_text())
    assert [Path(s["input"]).name for s in recorded["skipped"]] == ["config.json", "losses.csv"]


def test_a_truncated_trace_in_a_folder_fails_the_run(tmp_path: Path) -> None:
    # review repro: a trace cut to its first 1,100 bytes next to a good CSV
    job = tmp_path / "m2"
    job.mkdir()
    (job / "h.json.gz").write_bytes(gzip.compress(_trace_json(20_000))[:1100])
    (job / "saxpy.csv").write_text(raw_csv(KERNELS))
    result = analyze_many([job], tmp_path / "ds4", jobs=1)
    assert result.exit_code == 1
    assert [Path(f.input).name for f in result.failures] == ["h.json.gz"]
    assert str(job / "h.json.gz") in result.failures[0].error and "\n" not in result.failures[0].error
    text = result.summary()
    assert "1 of 2 inputs analyzed" in text and "FAILED (1)" in text


def test_globs_explicit_files_and_missing_specs(inputs: Path, tmp_path: Path) -> None:
    found = discover([str(inputs / "rank*" / "*.csv"), inputs / "rank0" / "profile.csv",
                      inputs / "notes" / "README.md", tmp_path / "absent.csv", str(tmp_path / "*.nope")])
    files, failures = found.files, found.failures
    # the glob finds 4; the explicit rank0 file is a duplicate; an explicitly named file is always taken
    assert len(files) == 5 and files[-1].name == "README.md"
    assert [(Path(f.input).name, f.error) for f in failures] == [
        ("absent.csv", "no such file or directory"), ("*.nope", "pattern matched no file")]


def test_source_keys_disambiguate_same_names(inputs: Path) -> None:
    files = discover([inputs]).files
    assert identity.source_keys(files) == [f"rank{r}/profile.csv" for r in range(4)]
    assert identity.source_keys([Path("/x/a.csv"), Path("/y/b.csv")]) == ["a.csv", "b.csv"]


# ---------------------------------------------------------------- rank / host inference (pure)


@pytest.mark.parametrize(
    ("template", "name", "host", "rank", "pid"),
    [
        ("prof_%h_%q{RANK}", "prof_gpu-node7_3.ncu-rep", "gpu-node7", 3, None),
        ("%q{OMPI_COMM_WORLD_RANK}.%p", "12.5531.csv", None, 12, 5531),
        ("run_%q{SLURM_PROCID}_%i", "run_5_0.ncu-rep", None, 5, None),
        ("x_%q{LOCAL_RANK}_%h", "x_1_hostz.csv", "hostz", None, None),  # a local rank is not the rank
        ("100%%_%q{PMI_RANK}", "100%_2.csv", None, 2, None),
    ],
)
def test_ncu_output_templates(template: str, name: str, host: str | None, rank: int | None, pid: int | None,
                              tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_text("x")
    ident = identity.infer_identity(path, name_template=template)
    assert (ident.host, ident.rank) == (host, rank)
    if pid is not None:
        assert (identity.template_regex(template).match(name).group("pid")  # type: ignore[union-attr]
                == str(pid))


@pytest.mark.parametrize(
    ("rel", "host", "rank"),
    [
        ("rank3/profile.csv", None, 3),
        ("run/trace_rank-12.json", None, 12),
        ("run/RANK_7_step2.csv", None, 7),
        ("host=node%2F9/x/rank=1/k.csv", "node/9", 1),
        ("node42_31337.1700000000123456789.pt.trace.json", "node42", None),  # torch tensorboard_trace_handler
        ("franky7/profile.csv", None, None),  # 'rank' inside a word is not a rank token
        ("mybranch12/profile.csv", None, None),
    ],
)
def test_file_name_patterns(rel: str, host: str | None, rank: int | None, tmp_path: Path) -> None:
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    ident = identity.infer_identity(path, root=tmp_path)
    assert (ident.host, ident.rank) == (host, rank)


def test_torch_trace_distributed_info_gives_the_rank(tmp_path: Path) -> None:
    path = tmp_path / "worker.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps({
        "schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 5, "world_size": 8},
        "traceEvents": []}).encode()))
    ident = identity.infer_identity(path)
    assert ident.rank == 5 and "distributedInfo" in ident.evidence[0]


def test_part_folders_are_encoded_and_never_hive_keys() -> None:
    # no '=' ever (a reader would take it for a hive key), no '/' inside a value, no leading '_' or
    # '.' (pyarrow skips such files as hidden)
    assert parquet.partition_dir("node/1", 0, "a b=c.csv") == "host-node%2F1/rank-0/source-a%20b%3Dc.csv"
    assert parquet.partition_dir(None, None, "_x.csv") == "host-unknown/rank-unknown/source-_x.csv"


# ---------------------------------------------------------------- end to end


def test_directory_to_dataset(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "ds"
    result = analyze_many([inputs], out, jobs=1)
    assert result.exit_code == 0, result.summary()
    parts = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet"))
    assert parts == [
        "host-nodeA/rank-0/source-rank0%2Fprofile.csv/part-0.parquet",
        "host-nodeA/rank-1/source-rank1%2Fprofile.csv/part-0.parquet",
        "host-nodeB/rank-2/source-rank2%2Fprofile.csv/part-0.parquet",
        "host-nodeB/rank-3/source-rank3%2Fprofile.csv/part-0.parquet",
    ]
    df = parquet.load(out)
    assert len(df) == 4 * 2 * 3  # 4 inputs x 2 kernels x 3 levels
    assert df["rank"].dtype == "Int64" and sorted(df["rank"].unique()) == [0, 1, 2, 3]
    dram = df[df["level"] == "dram"]
    # bounds from the A100 spec roofs (arithmetic above KERNELS)
    assert set(zip(dram["function"].astype(str), dram["bound"].astype(str), strict=True)) == {
        ("axpy", "memory"), ("gemm_kernel", "compute")}
    assert set(dram["ceiling_source"].astype(str)) == {"spec:A100 SXM4 40GB"}
    # each part file is a complete single-file report plus its rank: same columns, same metadata keys
    one = pd.read_parquet(out / parts[0])
    from nsroof.schema import COLUMNS

    assert list(one.columns) == [*COLUMNS, "rank"] and list(one["rank"]) == [0] * 6
    meta = parquet.read_metadata(out / parts[0])
    assert meta["dataset"]["rank"] == 0 and meta["inputs"][0]["name"] == "profile.csv"
    assert {m["name"] for m in meta["ceilings"]} == {"A100 SXM4 40GB"}
    # filters on the identity columns
    only = parquet.load(out, filters=[("host", "=", "nodeB"), ("rank", "=", 3)])
    assert set(only["source"].astype(str)) == {"rank3/profile.csv"} and len(only) == 6
    # the dataset summary file and text
    summary = json.loads((out / parquet.SUMMARY_FILE).read_text())
    assert [r["source"] for r in summary["inputs"]] == [f"rank{r}/profile.csv" for r in range(4)]
    text = result.summary()
    assert "4 of 4 inputs analyzed" in text and "nodeB" in text and "FAILED" not in text


def test_existing_partitions_are_not_overwritten(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "ds"
    assert analyze_many([inputs / "rank0"], out, jobs=1).exit_code == 0
    part = next(out.rglob("*.parquet"))
    before = (part.stat().st_mtime_ns, part.read_bytes())
    again = analyze_many([inputs / "rank0"], out, jobs=1)
    assert again.exit_code == 1
    assert (len(again.failures) == 1 and "already exists" in again.failures[0].error
            and "--overwrite" in again.failures[0].error)
    assert (part.stat().st_mtime_ns, part.read_bytes()) == before
    # new inputs still land next to the old partition
    more = analyze_many([inputs / "rank1"], out, jobs=1)
    assert more.exit_code == 0 and len(list(out.rglob("*.parquet"))) == 2
    forced = analyze_many([inputs / "rank0"], out, jobs=1, overwrite=True)
    assert forced.exit_code == 0 and len(list(out.rglob("*.parquet"))) == 2
    recorded = json.loads((out / parquet.SUMMARY_FILE).read_text())
    # rank from the folder each run named; the refused run kept the earlier record (and says why)
    assert [(r["source"], r["rank"], r["ok"]) for r in recorded["inputs"]] == [("profile.csv", 0, True),
                                                                               ("profile.csv", 1, True)]


def test_a_broken_input_is_listed_while_the_others_land(inputs: Path, tmp_path: Path) -> None:
    (inputs / "rank9").mkdir()
    broken = inputs / "rank9" / "profile.csv"
    broken.write_text("==PROF== Connected to process 77\n"
                      "==ERROR== The application returned an error code (1).\n")
    out = tmp_path / "ds"
    result = analyze_many([inputs], out, jobs=1)
    assert result.exit_code == 1
    assert [Path(f.input) for f in result.failures] == [broken]
    err = result.failures[0].error
    assert str(broken) in err and "\n" not in err and "Traceback" not in err
    assert len(list(out.rglob("*.parquet"))) == 4
    text = result.summary()
    assert "4 of 5 inputs analyzed" in text and "FAILED (1)" in text and str(broken) in text


def test_dask_local_cluster_equals_local_pool(inputs: Path, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    local = analyze_many([inputs], tmp_path / "local", jobs=2)
    # threads keep the test fast on a 2-core machine; the process pool above already covers pickling
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        remote = analyze_many([inputs], tmp_path / "dask", executor="dask",
                              scheduler=cluster.scheduler_address)
    assert local.exit_code == remote.exit_code == 0
    a, b = _sorted(parquet.load(tmp_path / "local")), _sorted(parquet.load(tmp_path / "dask"))
    pd.testing.assert_frame_equal(a, b)
    rel = sorted(p.relative_to(tmp_path / "local").as_posix()
                 for p in (tmp_path / "local").rglob("*.parquet"))
    assert rel == sorted(p.relative_to(tmp_path / "dask").as_posix()
                         for p in (tmp_path / "dask").rglob("*.parquet"))


def test_dask_without_a_scheduler_is_a_clear_error(tmp_path: Path) -> None:
    from nsroof.errors import NsroofError

    with pytest.raises(NsroofError, match="--scheduler"):
        analyze_many([tmp_path], tmp_path / "ds", executor="dask")


def test_inputs_that_name_nothing_are_an_input_error_and_nothing_is_written(inputs: Path,
                                                                            tmp_path: Path) -> None:
    from click.testing import CliRunner

    from nsroof.cli import cli

    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README.md").write_text("# nothing here\n")
    (empty / "config.json").write_text('{"lr": 0.1}')
    out = tmp_path / "ds"
    with pytest.raises(InputError, match="folder holds no ncu CSV") as err:
        analyze_many([empty], out, jobs=1)
    assert "config.json" in str(err.value)  # the export-named file it skipped, so the user sees why
    assert not out.exists()
    res = CliRunner().invoke(cli, ["analyze", str(empty), "-o", str(out)])
    assert res.exit_code == 2 and "folder holds no ncu CSV" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()
    # one good folder and one typo: still refused, before anything is written
    res = CliRunner().invoke(cli, ["analyze", str(inputs / "rank0"), str(tmp_path / "rank9"), "-o", str(out)])
    assert res.exit_code == 2 and "rank9: no such file or directory" in res.stderr and not out.exists()


def test_several_inputs_into_one_parquet_file_says_use_a_folder(inputs: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from nsroof.cli import cli

    target = tmp_path / "merged.parquet"
    res = CliRunner().invoke(cli, ["analyze", str(inputs / "rank0" / "profile.csv"),
                                   str(inputs / "rank1" / "profile.csv"), "-o", str(target)])
    assert res.exit_code == 2 and "use -o DIR" in res.stderr and res.stderr.strip().count("\n") == 0
    assert not target.exists()
    res = CliRunner().invoke(cli, ["analyze", str(inputs), "-o", str(target)])  # a folder of inputs too
    assert res.exit_code == 2 and "use -o DIR" in res.stderr and not target.exists()


def test_object_store_style_uri(inputs: Path, tmp_path: Path) -> None:
    # file:// goes through pyarrow.fs exactly as s3:// or gs:// would
    uri = (tmp_path / "ds").as_uri()
    (tmp_path / "ds").mkdir()
    result = analyze_many([inputs / "rank2"], uri, jobs=1)
    assert result.exit_code == 0, result.summary()
    assert len(parquet.load(tmp_path / "ds")) == 6


def test_shared_real_exports_into_one_dataset(shared_fixtures: Path, tmp_path: Path) -> None:
    # a mixed folder of real exports: CSVs of several ncu versions and locales, and .ncu-rep files
    job = tmp_path / "job"
    job.mkdir()
    picks = ["csv/averyclapp__metrics.csv", "csv/gardenia__gemm.csv", "csv/llmperfopt__error_only_raw.csv",
             "csv/olajide__saxpy.csv", "rep/nsighttraining__manual_nvtx.ncu-rep",
             "rep/bautista__report_name.ncu-rep", "converted/lashi__index.raw_base.csv"]
    for rel in picks:
        os.symlink(shared_fixtures / rel, job / Path(rel).name)  # links, not copies
    out = tmp_path / "ds"
    result = analyze_many([job], out, jobs=1)
    failed = {Path(f.input).name for f in result.failures}
    assert "llmperfopt__error_only_raw.csv" in failed  # holds only ==ERROR== lines
    assert result.exit_code == 1
    for f in result.failures:
        assert f.input in f.error and "\n" not in f.error
    landed = {o.source for o in result.ok}
    assert {"averyclapp__metrics.csv", "gardenia__gemm.csv", "lashi__index.raw_base.csv"} <= landed
    df = parquet.load(out)
    assert set(df["source"].astype(str)) == landed
    assert "NVIDIA GeForce RTX 4090" in set(df["device"].astype(str))


def test_symlinked_exports_are_judged_where_they_are_linked(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "p.csv").write_text(raw_csv(KERNELS))
    job = tmp_path / "job"
    for rank in (0, 1):
        (job / f"rank{rank}").mkdir(parents=True)
        os.symlink(store / "p.csv", job / f"rank{rank}" / "p.csv")
    files = discover([job / "rank1", job]).files
    assert [f.relative_to(job).as_posix() for f in files] == ["rank1/p.csv", "rank0/p.csv"]
    tasks = plan(files, tmp_path / "ds", roots=[job / "rank1", job])
    assert [(t.source, t.rank) for t in tasks] == [("rank1/p.csv", 1), ("rank0/p.csv", 0)]


def test_op_level_rows_land_in_the_sibling_ops_dataset(tmp_path: Path) -> None:
    data = DATA
    job = tmp_path / "job"
    job.mkdir()
    (job / "t.json").write_bytes((data / "traces" / "cross_thread.json").read_bytes())
    (job / "k.csv").write_bytes((data / "ncu" / "details_new.csv").read_bytes())
    out = tmp_path / "ds"
    result = analyze_many([job], out, jobs=1)
    assert result.exit_code == 0
    single = pipeline.analyze([job / "t.json"])
    ops = pd.read_parquet(f"{out}.ops")
    # the trace's op rows, stamped like its kernel rows; the CSV has no ops, so it has no part there
    assert len(ops) == len(single.ops) == 2
    assert f"2 op-level rows (the traces' costed ops) in {out}.ops" in render_summary(result)
    assert set(ops["source"].astype(str)) == {"t.json"}
    assert list(ops["op"].astype(str)) == list(single.ops["op"].astype(str))
    kernels = pd.read_parquet(out)  # the kernel dataset keeps one schema: no op rows in it
    assert set(kernels["source"].astype(str)) == {"t.json", "k.csv"}
    assert (kernels["kind"].astype(str) != "op").all()
    # an --overwrite run whose input now has no ops drops the part it left before
    (job / "t.json").unlink()
    (job / "t.json").write_bytes((data / "ncu" / "details_new.csv").read_bytes())
    assert analyze_many([job], out, jobs=1, overwrite=True).exit_code == 0
    assert not list(Path(f"{out}.ops").rglob("*.parquet"))


def _engine_trace(path: Path) -> Path:
    """A rank of a 1-GPU vLLM run: vllm::moe_forward (4 tokens × 64 hidden bf16, 8 experts' router logits) and
    a user op mylib::fused_bias_gelu (4×64 + 64 fp32), one kernel each."""
    def x(cat: str, name: str, ts: float, dur: float, **args: object) -> dict[str, object]:
        return {"ph": "X", "cat": cat, "name": name, "pid": 1 if cat != "kernel" else 0, "tid": 1, "ts": ts,
                "dur": dur, "args": args}

    events = [x("cpu_op", "vllm::moe_forward", 0, 20,
                **{"External id": 1, "Input Dims": [[4, 64], [4, 8], []],
                   "Input type": ["c10::BFloat16", "c10::BFloat16", ""]}),
              x("cuda_runtime", "cudaLaunchKernel", 1, 1, correlation=1, **{"External id": 1}),
              x("kernel", "fused_moe_kernel", 30, 5, correlation=1, device=0, stream=7),
              x("cpu_op", "mylib::fused_bias_gelu", 40, 20,
                **{"External id": 2, "Input Dims": [[4, 64], [64]], "Input type": ["float", "float"]}),
              x("cuda_runtime", "cudaLaunchKernel", 41, 1, correlation=2, **{"External id": 2}),
              x("kernel", "gelu_kernel", 70, 5, correlation=2, device=0, stream=7)]
    path.write_text(json.dumps({"traceEvents": events, "distributedInfo": {"world_size": 1, "rank": 0}}))
    return path


def test_model_config_and_formulas_reach_the_worker_processes(tmp_path: Path, repo: Path,
                                                              data_dir: Path) -> None:
    from tests._cli import invoke

    job = tmp_path / "job"
    job.mkdir()
    for name in ("a.json", "b.json"):
        _engine_trace(job / name)
    config, formulas = (data_dir / "models" / "gpt-oss-120b.config.json",
                        repo / "docs" / "examples" / "my_formulas.py")
    code, out, err = invoke("analyze", str(job), "-o", str(tmp_path / "ds"), "-j", "2", "--model-config",
                            str(config), "--formulas", str(formulas))
    assert code == 0, err
    rows = pd.read_parquet(tmp_path / "ds")
    assert sorted(rows["source"].astype(str)) == ["a.json", "a.json", "b.json", "b.json"]
    # costed in the workers, as in one process: neither "give --model-config" nor "no formula for mylib::…"
    assert rows["flops"].notna().all(), rows[["source", "op", "missing"]].to_dict("records")
    gelu = rows[rows["op"].astype(str) == "mylib::fused_bias_gelu"]
    assert (gelu["flops"] == 6 * 4 * 64).all()  # the example's 6 FLOP per element of x


def test_the_dataset_summary_says_kernel_time_is_summed_and_gives_the_busy_time(tmp_path: Path) -> None:
    from tests.roofs.test_classify_link import write_trace

    job = tmp_path / "job"
    job.mkdir()
    write_trace(job, "NVIDIA H100 80GB HBM3")
    result = analyze_many([job], tmp_path / "ds", jobs=1)
    text = render_summary(result)
    # the NCCL kernel [100, 120) µs beside the GEMM [110, 130) µs: 40 µs summed, 30 µs busy
    assert "kernel time" in text and "GPU time" not in text
    assert "the GPUs were busy 30 us (kernels overlapping on streams counted once)" in text
    assert result.outcomes[0].busy_s == pytest.approx(30e-6, rel=1e-12)


def test_an_unwritable_op_dataset_fails_the_input_without_a_kernel_part(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "t.json").write_bytes((DATA / "traces" / "cross_thread.json").read_bytes())
    out = tmp_path / "ds"
    Path(f"{out}.ops").write_text("a file where the op dataset would go")
    result = analyze_many([job], out, jobs=1)
    assert result.exit_code != 0 and "cannot write the output" in result.failures[0].error
    assert not list(out.rglob("*.parquet"))
