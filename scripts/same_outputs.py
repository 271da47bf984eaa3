#!/usr/bin/env python3
"""Prove that two source trees of nsroof give the same outputs on every input: a refactor changed nothing.

    python scripts/same_outputs.py --before REV [--after PATH_OR_REV] [--jobs 2] [--only SUBSTRING]

BEFORE is a git revision (or a folder), checked out with `git worktree add --detach` into a temporary
folder that is removed at the end; AFTER is a folder or a revision, by default the tree this script lives
in. Each tree runs in worker processes of this same script (`--worker`), with PYTHONPATH=<tree> and the
tree as working directory, so each side imports its own nsroof; a worker refuses to run when nsroof came
from anywhere else (an editable install could shadow the tree). Workers touch nsroof's public surface
only (`import nsroof` and the console script `nsroof.cli:main` run in-process by click's CliRunner), the
part that stays put when modules move.

Inputs: every file under tests/data and nsroof/data/examples of each tree, every input under
../shared/fixtures (beside the repo; skipped when absent), the replay traces with the traces of their graph
captures, a few option variants (--ledger, --machine, --aggregate, a selection, several inputs, a model
config) and the input-free commands (machines, ledger listing, sweeps and every formula, compare, help).
Per input it fingerprints the report and op frames, warnings and hints, the metadata, nsroof.summary, the
SVG chart, the HTML page, and the CLI's summary, --json, --csv and --by name output, exit codes and the
files it writes; refused inputs give their error message and exit code. Paths of the temporary folders,
the trees, the fixtures and the venv are replaced by placeholders first.

Prints one block per differing (input, output) with a short diff and ends with `N inputs, M outputs
compared: all identical` (exit 0) or `... K differ` (exit 1); exit 2 when the run itself failed.
"""

from __future__ import annotations

import argparse
import difflib
import gc
import hashlib
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
REPO = SCRIPT.parents[1]
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"  # ../shared/fixtures, relative to the repo root
ENTRY_POINT = "nsroof.cli:main"  # pyproject's [project.scripts]: the CLI as users run it

# the same process environment on both sides, so nothing but the source tree differs
WORKER_ENV = {
    "PYTHONHASHSEED": "0", "MPLBACKEND": "Agg", "TZ": "UTC", "COLUMNS": "120", "LC_ALL": "C.UTF-8",
    "SOURCE_DATE_EPOCH": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ written into the live tree
}
SMALL = 200_000  # outputs up to this many bytes are stored whole (diffable), larger ones as hashes
MAX_LINE_HASHES = 200_000  # per-line hashes of a large output, to say which lines differ
PROBES = 2  # charts and pages rendered twice on a shard's first cases, to check they are deterministic
DIFF_LINES = 14  # diff lines shown per differing output

# Inputs that need a companion the facade cannot take: replay traces with their capture traces (tests/
# importers/test_trace_graphs.py), engine traces with a model config (tests/models/test_ledger_engine.py).
VLLM = "shared/traces/tracelens__vllm_decode_full__graph_execution.json.gz"
VLLM_CAPTURE = ("shared/traces/tracelens__vllm_decode_full__graph_capture_rank_0.1773709742341309550"
                ".pt.trace.json.gz")
SGLANG = "shared/traces/tracelens__sglang_decode__sglang_Qwen3-8B_decode.json.gz"
SGLANG_CAPTURE = "shared/traces/tracelens__sglang_decode__capture_bs_32_rank0.json.gz"
CAPTURES: list[tuple[str, tuple[str, ...]]] = [
    ("tests/data/traces/graph_replay.json", ("tests/data/traces/graph_capture.json",)),
    ("tests/data/traces/graph_replay_ids.json", ("tests/data/traces/graph_capture.json",)),
    ("tests/data/traces/rocm_replay.json", ("tests/data/traces/rocm_capture.json",)),
    ("tests/data/traces/graph_replay.json",
     ("tests/data/traces/graph_capture.json", "tests/data/traces/rocm_capture.json")),
    (VLLM, (VLLM_CAPTURE,)),
    (SGLANG, (SGLANG_CAPTURE,)),
]
EXAMPLE = "nsroof/data/examples/example_details.csv"
NVTX_EXPORT = "shared/synthetic/fixture_ncu2024_raw_nvtx_base.csv"
# (inputs, keyword arguments of nsroof.analyze (None: the facade has no such option), extra CLI arguments)
VARIANTS: list[tuple[tuple[str, ...], dict[str, Any] | None, tuple[str, ...]]] = [
    (("shared/csv/gardenia__gemm.csv",), {"ledger": "tests/data/ledger/gardenia_gemm.yaml"},
     ("--ledger", "tests/data/ledger/gardenia_gemm.yaml")),
    *[((NVTX_EXPORT,), {"ledger": f"tests/data/ledger/{m}"}, ("--ledger", f"tests/data/ledger/{m}"))
      for m in ("nvtx_markers.yaml", "mapping.yaml", "mapping.json")],
    (("tests/data/collectors/ncu_raw_nvtx.csv",), {"ledger": "tests/data/ledger/mapping.yaml"},
     ("--ledger", "tests/data/ledger/mapping.yaml")),
    ((EXAMPLE,), {"machine": "h100-sxm"}, ("--machine", "h100-sxm")),
    (("shared/rep/lashi__index.ncu-rep",), {"machine": "a100-40gb"}, ("--machine", "a100-40gb")),
    (("tests/data/traces/cross_thread.json",), {"machine": "tests/data/collectors/test-cpu.json"},
     ("--machine", "tests/data/collectors/test-cpu.json")),
    (("shared/csv/leleucas__pooling_nsight16.csv",), {"aggregate": True}, ("--aggregate",)),
    (("shared/traces/hta__timeline_analysis_sampled_rank-0.json.gz",), {"aggregate": True}, ("--aggregate",)),
    (("tests/data/report/by_name_raw.csv",), {"aggregate": True}, ("--aggregate",)),
    ((EXAMPLE,), {"kernel": "gemm", "nvtx": "forward"}, ("--kernel", "gemm", "--nvtx", "forward")),
    ((EXAMPLE,), {"kernel": "no-such-kernel"}, ("--kernel", "no-such-kernel")),
    ((EXAMPLE, "tests/data/ncu/details_new.csv"), {}, ("-j", "1")),
    ((EXAMPLE, "tests/data/traces/huge_int.json"), {}, ("-j", "1")),
    *[((replay,), None, tuple(a for c in captures for a in ("--capture", c)))
      for replay, captures in CAPTURES],
    (("shared/traces/tracelens__b200__eager_trace.json.gz",), None,
     ("--machine", "b200", "--model-config", "tests/data/models/gpt-oss-120b.config.json",
      "--formulas", "docs/examples/my_formulas.py")),
    ((VLLM,), None,
     ("--capture", VLLM_CAPTURE, "--model-config", "tests/data/models/gpt-oss-20b.config.json")),
]
COMMANDS = ("analyze", "compare", "demo", "ledger", "machines", "measure", "ncu", "plot", "profile", "report")
# input-free (or report-only) commands, run as they are
COMMAND_CASES: list[tuple[str, ...]] = [
    ("--help",), ("--version",), *[(c, "--help") for c in COMMANDS],
    ("machines",), ("machines", "--json"), ("machines", "--machine", "h100-sxm"),
    ("machines", "--machine", "tests/data/collectors/test-cpu.json"),
    ("machines", "--machine", "no-such-gpu"),
    ("ledger",), ("ledger", "--sweep"), ("ledger", "--sweep", "--json"),
    ("ledger", "decode", "--sweep", "--params", "7e9"), ("ledger", "attention", "--sweep"),
    ("ledger", "attention-traffic", "--sweep"),
    ("ledger", "gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "bf16"),
    ("ledger", "gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "bf16", "--json"),
    ("ledger", "gemm", "--m", "512", "--n", "512", "--k", "512", "--machine", "a100-40gb", "--level", "l2"),
    ("compare", "tests/data/report/by_name_raw.csv", "tests/data/spine/tiny_raw.csv"),
    ("compare", "tests/data/report/by_name_raw.csv", "tests/data/spine/tiny_raw.csv", "--json"),
    ("compare", "tests/data/report/by_name_raw.csv", "tests/data/spine/tiny_raw.csv", "--csv"),
    ("compare", "tests/data/traces/graph_replay.json", "tests/data/traces/graph_replay_ids.json"),
    ("compare", "shared/converted/alprielse__2025-04-21-77_06-MT.raw_base.csv",
     "shared/converted/alprielse__2025-04-21-77_06-MT.details_base.csv", "--json"),
]
# Dataset mode's run times (the summary header, `wall_s`/`cpu_s` in _nsroof_dataset.json): the only volatile
# outputs found. Report metadata holds none (nsroof_version, schema_version, inputs (name, path as given,
# sha256, format, facts), ceilings, units, ledger, machine, warnings, hints: all functions of the input).
VOLATILE_KEYS = frozenset({"wall_s", "cpu_s"})
VOLATILE_TEXT = [(re.compile(r"(inputs? analyzed \([^)\n]*?)[0-9.]+ (m?s)\)"), r"\1<time> \2)")]


# --------------------------------------------------------------------------- cases (worker side)

@dataclass
class Case:
    """One thing to run: inputs through the facade and the CLI, or one plain command."""

    key: str  # the same on both sides: paths relative to the tree, or shared/… for the fixtures
    inputs: tuple[str, ...] = ()  # as handed to nsroof (relative to the tree, or absolute fixtures)
    api: dict[str, Any] | None = field(default_factory=dict)  # nsroof.analyze keywords; None: CLI only
    cli: tuple[str, ...] = ()  # extra `nsroof analyze` arguments
    command: tuple[str, ...] | None = None  # a plain CLI invocation instead of an analysis


class Where:
    """Turns the case tables' names (tree-relative, shared/…) into paths nsroof is given: tree files stay
    relative (cwd is the tree), so messages print the same text on both sides."""

    def __init__(self, tree: Path, shared: Path | None) -> None:
        self.tree, self.shared = tree, shared

    def path(self, name: str) -> str | None:
        """The path to hand nsroof, or None when the file is absent here (the case is then left out)."""
        if name.startswith("shared/"):
            if self.shared is None:
                return None
            full = self.shared / name.removeprefix("shared/")
            return str(full) if full.is_file() else None
        return name if (self.tree / name).is_file() else None

    def args(self, items: tuple[str, ...]) -> tuple[str, ...] | None:
        """Arguments with file names resolved (anything that looks like a file name must exist)."""
        out = []
        for item in items:
            if _looks_like_file(item):
                resolved = self.path(item)
                if resolved is None:
                    return None
                item = resolved
            out.append(item)
        return tuple(out)


def _looks_like_file(item: str) -> bool:
    """In the case tables an argument with a slash names a file (no regex or NVTX path there has one)."""
    return "/" in item and not item.startswith("-")


def file_cases(where: Where) -> list[Case]:
    """Every file the repo ships or tests with, and every input of the shared fixtures, analyzed as is."""
    names = [*_tree_files(where.tree, "tests/data"), *_tree_files(where.tree, "nsroof/data/examples")]
    if where.shared is not None:
        names += [f"shared/{n}" for n in _shared_inputs(where.shared)]
    return [Case(key=n, inputs=(p,)) for n in names if (p := where.path(n)) is not None]


def _tree_files(tree: Path, folder: str) -> list[str]:
    base = tree / folder
    if not base.is_dir():
        return []
    return sorted(p.relative_to(tree).as_posix() for p in base.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def _shared_inputs(shared: Path) -> list[str]:
    """All of ../shared/fixtures but MANIFEST.md and peer/ (another tool's answers, no nsroof input)."""
    names = []
    for p in sorted(shared.rglob("*")):
        rel = p.relative_to(shared)
        if p.is_file() and rel.parts[0] != "peer" and rel.as_posix() != "MANIFEST.md":
            names.append(rel.as_posix())
    return names


def variant_cases(where: Where) -> list[Case]:
    """The option variants of VARIANTS whose files are all here."""
    cases = []
    for names, api, cli in VARIANTS:
        inputs, extra = where.args(names), where.args(cli)
        api_args = None if api is None else {k: _api_value(where, v) for k, v in api.items()}
        if inputs is None or extra is None or (api_args is not None and None in api_args.values()):
            continue
        key = " + ".join(names) + (f" [{' '.join(cli)}]" if cli else "")
        cases.append(Case(key=f"variant: {key}", inputs=inputs, api=api_args, cli=extra))
    return cases


def _api_value(where: Where, value: Any) -> Any:
    """A keyword argument of nsroof.analyze, file names resolved like the CLI's (None: absent here)."""
    return where.path(value) if isinstance(value, str) and _looks_like_file(value) else value


def command_cases(where: Where) -> list[Case]:
    """The fixed commands, then every ledger formula with its required parameters (from the listing)."""
    cases = []
    for argv in [*COMMAND_CASES, *_formula_commands()]:
        resolved = where.args(argv)
        if resolved is not None:
            cases.append(Case(key="command: nsroof " + " ".join(argv), api=None, command=resolved))
    return cases


def _formula_commands() -> list[tuple[str, ...]]:
    """`nsroof ledger OP --param V …` for each formula `nsroof ledger` lists (INT 64, FLOAT 8), text and
    --json: every formula runs, not only those a test names."""
    listing = invoke(["ledger"])
    commands = []
    for name, params in re.findall(r"^  ([a-z][\w-]*) .*\n +(--.*)$", listing, flags=re.M):
        required = re.sub(r"\[[^\]]*\]", "", params)
        argv = ("ledger", name, *[x for p, t in re.findall(r"(--[\w-]+) (INT|FLOAT)", required)
                                 for x in (p, "64" if t == "INT" else "8")])
        commands += [argv, (*argv, "--json")]
    return commands


def all_cases(where: Where, only: str | None) -> list[Case]:
    """Every case, sorted by key (the same order on both sides), filtered by --only."""
    cases = [*file_cases(where), *variant_cases(where), *command_cases(where)]
    unique = {c.key: c for c in cases}
    return [unique[k] for k in sorted(unique) if only is None or only in k]


# --------------------------------------------------------------------------- fingerprints (worker side)

class Normalizer:
    """Replaces the run's own absolute paths (scratch folder, tree, fixtures, venv) with placeholders, the
    longest first, so two trees' outputs compare equal when only their locations differ."""

    def __init__(self, pairs: dict[str, str]) -> None:
        expanded: dict[str, str] = {}
        for path, name in pairs.items():
            expanded[path] = name
            expanded[os.path.realpath(path)] = name
        self.pairs = sorted(expanded.items(), key=lambda kv: -len(kv[0]))

    def __call__(self, text: str) -> str:
        for path, name in self.pairs:
            text = text.replace(path, name)
        for pattern, replacement in VOLATILE_TEXT:
            text = pattern.sub(replacement, text)
        return text


def _digest(data: str | bytes, n: int = 64) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()[:n]


def entry(text: str, columns: dict[str, str] | None = None) -> dict[str, Any]:
    """An output as stored: the whole text when small (shown as a diff), else its hash, size and one short
    hash per line (to name the differing lines), plus a hash per column for frames."""
    data = text.encode()
    if len(data) <= SMALL:
        return {"text": text}
    lines = text.split("\n")
    stored: dict[str, Any] = {"sha256": _digest(data), "size": len(data), "lines": len(lines)}
    if len(lines) <= MAX_LINE_HASHES:
        stored["line_hashes"] = [_digest(line, 12) for line in lines]
    if columns:
        stored["columns"] = columns
    return stored


def _cell(value: Any) -> Any:
    """One frame value as JSON: exact (repr-exact floats, NaN, -0.0), typed (1 vs 1.0 vs "1"), and with
    missing values told apart (None, NaN, pd.NA, NaT)."""
    import numpy as np

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list):
        return [_cell(v) for v in value]
    if isinstance(value, (tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return {type(value).__name__: [_cell(v) for v in items]}
    if isinstance(value, dict):
        return {"dict": [[_cell(k), _cell(v)] for k, v in value.items()]}
    return f"<{type(value).__name__}> {value!r}"


def _dtype(dtype: Any) -> str:
    """A dtype's name; categoricals also say their categories (hashed) and whether they are ordered."""
    cats = getattr(dtype, "categories", None)
    if cats is None:
        return str(dtype)
    listed = json.dumps([_cell(c) for c in cats.tolist()], ensure_ascii=False)
    return f"category(n={len(cats)}, ordered={dtype.ordered}, sha={_digest(listed, 16)})"


def frame_entry(frame: Any, norm: Normalizer) -> dict[str, Any]:
    """A DataFrame as canonical text: a header line (columns, dtypes, index dtype, attrs), then one JSON line
    per row (index, then every cell); hashed per column too, when large."""
    columns = [str(c) for c in frame.columns]
    header = {"columns": columns, "dtypes": [_dtype(t) for t in frame.dtypes],
              "index": str(frame.index.dtype), "rows": len(frame),
              "attrs": json.loads(json.dumps(frame.attrs, default=repr, sort_keys=True))}
    cells = [[_cell(v) for v in frame.iloc[:, i].tolist()] for i in range(frame.shape[1])]
    index = [_cell(v) for v in frame.index.tolist()]
    rows = [json.dumps(list(row), ensure_ascii=False) for row in zip(index, *cells, strict=True)]
    text = norm("\n".join([json.dumps(header, ensure_ascii=False, sort_keys=True), *rows]))
    if len(text) <= SMALL:
        return {**entry(text), "frame": True}
    column_hashes = {f"{i}:{name}": _digest(norm(json.dumps(col, ensure_ascii=False)), 16)
                     for i, (name, col) in enumerate(zip(columns, cells, strict=True))}
    return {**entry(text, column_hashes), "frame": True}


def json_text(value: Any) -> str:
    """Metadata and the like as sorted, indented JSON (volatile keys dropped): one fact per line to diff."""
    return json.dumps(_stable(value), indent=1, sort_keys=True, ensure_ascii=False, default=repr)


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _stable(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, (list, tuple)):
        return [_stable(v) for v in value]
    return value


class _Entry:
    """CliRunner runs a click command (`.name`, `.main(args=…)`); the public entry point is the function
    nsroof.cli:main(argv), so this hands it the arguments exactly as the console script would."""

    name = "nsroof"

    def __init__(self, main: Callable[[list[str]], Any]) -> None:
        self._main = main

    def main(self, args: Any = None, prog_name: str | None = None, **_: Any) -> Any:
        return self._main(list(args or ()))


def _entry_point() -> Callable[[list[str]], Any]:
    module, attr = ENTRY_POINT.split(":")
    main: Callable[[list[str]], Any] = getattr(importlib.import_module(module), attr)
    return main


def invoke(argv: list[str]) -> str:
    """`nsroof ARGV` in-process: exit code, stdout, stderr and an unexpected exception, as one text."""
    from click.testing import CliRunner

    result = CliRunner().invoke(_Entry(_entry_point()), argv)  # type: ignore[arg-type]
    text = f"exit {result.exit_code}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        text += f"--- exception\n{type(exc).__name__}: {exc}\n"
    return text


def failure(exc: BaseException) -> str:
    """An exception as output: its type and message (no traceback: its files and lines move in a
    refactor)."""
    import nsroof

    kind = "refused" if isinstance(exc, nsroof.NsroofError) else "crashed"
    return f"{kind}: {type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- running a case (worker side)

@dataclass
class Worker:
    """What a worker carries from case to case: paths, the normalizer, the determinism probes."""

    tree: Path
    scratch: Path
    norm: Normalizer
    recheck: bool = False
    checked: dict[str, int] = field(default_factory=dict)
    nondeterministic: dict[str, str] = field(default_factory=dict)

    def fresh(self, name: str) -> Path:
        """An empty scratch folder (same name for every case: outputs that print it stay alike)."""
        path = self.scratch / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path


def run_case(case: Case, worker: Worker) -> dict[str, dict[str, Any]]:
    """Every output of one case, Python warnings included (category and message: where they were raised
    from moves in a refactor)."""
    outputs: dict[str, dict[str, Any]] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if case.command is not None:
            outputs["cli"] = entry(worker.norm(invoke(list(case.command))))
        else:
            if case.api is not None:
                outputs.update(api_outputs(case, worker))
            outputs.update(cli_outputs(case, worker))
    seen = list(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught))
    if seen:
        outputs["python_warnings"] = entry(worker.norm("\n".join(seen)))
    return outputs


def api_outputs(case: Case, worker: Worker) -> dict[str, dict[str, Any]]:
    """The facade: nsroof.analyze, then what a Report holds and what summary/plot/html make of it."""
    import nsroof

    norm = worker.norm
    target: Any = list(case.inputs) if len(case.inputs) > 1 else case.inputs[0]
    try:
        report = nsroof.analyze(target, **(case.api or {}))
    except Exception as exc:  # refused inputs are outputs too; so is a crash, which a refactor may cause
        return {"api.error": entry(norm(failure(exc)))}
    out = {
        "api.frame": frame_entry(report.frame, norm),
        "api.ops": frame_entry(report.ops, norm),
        "api.warnings": entry(norm("\n".join(report.warnings))),
        "api.hints": entry(norm("\n".join(report.hints))),
        "api.metadata": entry(norm(json_text(report.metadata))),
        "api.repr": entry(norm(repr(report))),
        "api.summary": entry(norm(_guarded(lambda: nsroof.summary(report)))),
        "api.chart.svg": render("api.chart.svg", case, worker, lambda: _chart(report, worker)),
        "api.page.html": render("api.page.html", case, worker, lambda: _page(report, worker)),
    }
    return out  # the report is freed on return: one report alive at a time


def _guarded(make: Callable[[], str]) -> str:
    try:
        return make()
    except Exception as exc:
        return failure(exc)


def _chart(report: Any, worker: Worker) -> str:
    """nsroof.plot's SVG (fixed hash salt; SOURCE_DATE_EPOCH keeps the date out), as text."""
    import matplotlib
    import matplotlib.pyplot as plt

    import nsroof

    matplotlib.rcParams["svg.hashsalt"] = "same-outputs"
    path = worker.fresh("chart") / "chart.svg"
    fig = nsroof.plot(report, path)
    plt.close(fig)
    plt.close("all")
    return path.read_text(encoding="utf-8")


def _page(report: Any, worker: Worker) -> str:
    import nsroof

    path = worker.fresh("page") / "page.html"
    nsroof.html(report, path)
    return path.read_text(encoding="utf-8")


def render(kind: str, case: Case, worker: Worker, make: Callable[[], str]) -> dict[str, Any]:
    """A chart or page; on a shard's first PROBES cases (every case with --recheck) rendered twice, and
    skipped from then on, with a note, when the two differ: only deterministic bytes are compared."""
    if kind in worker.nondeterministic:
        return {"skipped": worker.nondeterministic[kind]}
    first = _guarded(make)
    if worker.recheck or worker.checked.get(kind, 0) < PROBES:
        worker.checked[kind] = worker.checked.get(kind, 0) + 1
        if _guarded(make) != first:
            worker.nondeterministic[kind] = f"not deterministic: two renders of {case.key} differ"
            return {"skipped": worker.nondeterministic[kind]}
    return entry(worker.norm(first))


def cli_outputs(case: Case, worker: Worker) -> dict[str, dict[str, Any]]:
    """`nsroof analyze` as a user runs it: the summary and the files written (each report loaded back with
    nsroof.load), then --json, --csv and --by name, each into a fresh folder."""
    norm, dataset = worker.norm, len(case.inputs) > 1
    name = "dataset" if dataset else "report.parquet"  # several inputs make a dataset folder
    folder = worker.fresh("cli")
    out: dict[str, dict[str, Any]] = {
        "cli.analyze": entry(norm(invoke(["analyze", *case.inputs, "-o", str(folder / name), *case.cli]))),
        "cli.files": entry(norm(_listing(folder))),
    }
    for target in _reports(folder, dataset):
        out.update(_loaded(target, folder, norm))
    for flags in (("--json",), ("--csv",), ("--by", "name", "--csv")):
        folder = worker.fresh("cli")
        argv = ["analyze", *case.inputs, "-o", str(folder / name), *case.cli, *flags]
        out["cli." + " ".join(flags).replace("--", "")] = entry(norm(invoke(argv)))
    return out


def _listing(folder: Path) -> str:
    """The files the command wrote: their names, and the contents of the text ones (JSON with its volatile
    keys dropped); Parquet files are compared loaded (_loaded), not as bytes (they embed library versions)."""
    lines = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if path.suffix == ".parquet":
            lines.append(f"== {rel} (parquet)")
            continue
        text = path.read_text(encoding="utf-8", errors="backslashreplace")
        if path.suffix == ".json":
            text = _json_file(text)
        lines += [f"== {rel}", text]
    return "\n".join(lines)


def _json_file(text: str) -> str:
    try:
        return json_text(json.loads(text))
    except ValueError:
        return text


def _reports(folder: Path, dataset: bool) -> list[Path]:
    if dataset:
        return [p for p in folder.iterdir() if p.is_dir()]
    return sorted(folder.glob("*.parquet"))


def _loaded(target: Path, folder: Path, norm: Normalizer) -> dict[str, dict[str, Any]]:
    """A written report (or dataset folder) read back with nsroof.load: its frame and metadata."""
    import nsroof

    label = f"cli.load:{target.relative_to(folder).as_posix()}"
    try:
        report = nsroof.load(target)
    except Exception as exc:
        return {label: entry(norm(failure(exc)))}
    return {f"{label}.frame": frame_entry(report.frame, norm),
            f"{label}.metadata": entry(norm(json_text(report.metadata)))}


# --------------------------------------------------------------------------- worker main

def check_import(tree: Path) -> str:
    """nsroof (and its CLI module) must come from TREE: anything else (an editable install, a stray
    PYTHONPATH) would compare a tree with itself and prove nothing."""
    import nsroof

    for module in (nsroof, importlib.import_module(ENTRY_POINT.split(":")[0])):
        file = Path(module.__file__ or "").resolve()
        if not file.is_relative_to(tree.resolve()):
            raise SystemExit(f"same_outputs: worker for {tree} imported {module.__name__} from {file}, "
                             f"not from the tree: check PYTHONPATH and the venv's editable install")
    return str(Path(nsroof.__file__ or "").resolve())


def worker_main(args: argparse.Namespace) -> int:
    """One shard of one tree: every case in order, one JSON line each (written as it goes: memory stays at
    one report, and a crash leaves what was done)."""
    if sys.path and Path(sys.path[0]).resolve() == SCRIPT.parent:
        sys.path.pop(0)  # scripts/ must not shadow anything the tree imports
    tree, scratch = Path(args.tree), Path(args.scratch)
    shared = Path(args.shared) if args.shared else None
    nsroof_file = check_import(tree)
    norm = Normalizer({str(scratch): "<tmp>", str(tree): "<tree>", sys.prefix: "<venv>",
                       **({str(shared): "<shared>"} if shared else {})})
    worker = Worker(tree=tree, scratch=scratch, norm=norm, recheck=args.recheck)
    index, count = (int(x) for x in args.shard.split("/"))
    cases = all_cases(Where(tree, shared), args.only)[index::count]
    started = time.monotonic()
    with open(args.worker, "w", encoding="utf-8") as out:
        out.write(json.dumps({"type": "start", "nsroof": norm(nsroof_file), "cases": len(cases)}) + "\n")
        for n, case in enumerate(cases, 1):
            t = time.monotonic()
            outputs = run_case(case, worker)
            record = {"type": "case", "key": case.key, "outputs": outputs}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            out.flush()
            print(f"[{n}/{len(cases)}] {time.monotonic() - t:6.2f} s {case.key}", file=sys.stderr, flush=True)
            del outputs
            gc.collect()
        out.write(json.dumps({"type": "end", "nondeterministic": worker.nondeterministic,
                              "seconds": round(time.monotonic() - started, 1)}) + "\n")
    return 0


# --------------------------------------------------------------------------- the two trees (parent side)

def git(*argv: str) -> str:
    done = subprocess.run(["git", "-C", str(REPO), *argv], check=True, capture_output=True, text=True)
    return done.stdout.strip()


@contextmanager
def tree_of(spec: str, run: Path, label: str) -> Iterator[tuple[Path, str]]:
    """A folder as it is, or a revision checked out (detached) into a worktree under RUN, removed after."""
    if Path(spec).is_dir():
        yield Path(spec).resolve(), f"{spec} (folder)"
        return
    try:
        sha = git("rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}")
    except subprocess.CalledProcessError:
        raise SystemExit(f"same_outputs: {spec!r} is neither a folder nor a git revision of {REPO}") from None
    path = run / f"{label}-tree"
    git("worktree", "add", "--detach", "--quiet", str(path), sha)
    try:
        yield path, f"{spec} ({sha[:12]})"
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)],
                       capture_output=True)


@dataclass
class Shard:
    """One worker process to run: which tree, which slice of the cases, where its results go."""

    side: str
    tree: Path
    index: int
    count: int
    run: Path

    @property
    def name(self) -> str:
        return f"{self.side}-{self.index}"

    @property
    def results(self) -> Path:
        return self.run / f"{self.name}.jsonl"

    @property
    def log(self) -> Path:
        return self.run / f"{self.name}.log"

    @property
    def scratch(self) -> Path:
        # the same length on both sides: text wrapped at the terminal width wraps alike
        return self.run / f"w{'ab'[self.side == 'after']}{self.index}"


def run_shard(shard: Shard, args: argparse.Namespace, shared: Path | None) -> tuple[Shard, int, float]:
    """One worker: this script with --worker, PYTHONPATH and cwd the tree, the pinned environment."""
    argv = [sys.executable, str(SCRIPT), "--worker", str(shard.results), "--tree", str(shard.tree),
            "--scratch", str(shard.scratch), "--shard", f"{shard.index}/{shard.count}"]
    argv += ["--shared", str(shared)] if shared else []
    argv += ["--only", args.only] if args.only else []
    argv += ["--recheck"] if args.recheck else []
    env = {**os.environ, **WORKER_ENV, "PYTHONPATH": str(shard.tree),
           "NSROOF_CACHE_DIR": str(shard.scratch / "cache")}
    shard.scratch.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(shard.log, "w", encoding="utf-8") as log:
        code = subprocess.run(argv, cwd=shard.tree, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    return shard, code, time.monotonic() - started


def read_side(shards: list[Shard]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """A side's cases (key -> outputs) from its shards' files, and the outputs found nondeterministic."""
    cases: dict[str, dict[str, Any]] = {}
    nondeterministic: dict[str, str] = {}
    for shard in shards:
        ended = False
        with open(shard.results, encoding="utf-8") as f:
            for line in f:
                record = json.loads(line)
                if record["type"] == "case":
                    cases[record["key"]] = record["outputs"]
                elif record["type"] == "end":
                    ended = True
                    nondeterministic.update(record["nondeterministic"])
        if not ended:
            raise SystemExit(f"same_outputs: worker {shard.name} stopped early; see {shard.log}")
    return cases, nondeterministic


def run_workers(trees: dict[str, Path], args: argparse.Namespace, run: Path,
                shared: Path | None) -> dict[str, list[Shard]]:
    """Both trees' workers, --jobs at a time (each tree's cases split over jobs // 2 shards)."""
    count = max(1, args.jobs // 2)
    shards = {side: [Shard(side, tree, i, count, run) for i in range(count)] for side, tree in trees.items()}
    failed = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        jobs = [pool.submit(run_shard, s, args, shared) for side in shards.values() for s in side]
        for job in jobs:
            shard, code, seconds = job.result()
            status = "ok" if code == 0 else f"FAILED (exit {code})"
            print(f"  {shard.name}: {status} in {seconds:.0f} s", flush=True)
            if code != 0:
                failed.append(shard)
    for shard in failed:
        tail = shard.log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        print(f"same_outputs: worker {shard.name} failed; the end of {shard.log}:", *tail, sep="\n  ",
              file=sys.stderr)
    if failed:
        raise SystemExit(2)
    return shards


# --------------------------------------------------------------------------- comparing (parent side)

def _lines(stored: dict[str, Any]) -> list[str] | None:
    if "text" in stored:
        return [_digest(line, 12) for line in stored["text"].split("\n")]
    return stored.get("line_hashes")


def _size(stored: dict[str, Any]) -> int:
    return int(stored["size"]) if "size" in stored else len(stored.get("text", "").encode())


def describe(a: dict[str, Any] | None, b: dict[str, Any] | None, width: int) -> list[str]:
    """A short account of how two stored outputs differ: a unified diff when both are whole texts, else
    sizes, the differing line ranges and (frames) columns."""
    if a is None or b is None:
        return [f"only in {'after' if a is None else 'before'}"]
    if a.get("frame") and b.get("frame") and "text" in a and "text" in b:
        return describe_frames(a["text"], b["text"], width)
    if "text" in a and "text" in b:
        diff = list(difflib.unified_diff(a["text"].split("\n"), b["text"].split("\n"), "before", "after",
                                         lineterm="", n=1))[2:]
        return [line[:width] for line in diff]
    if "skipped" in a or "skipped" in b:
        return [f"before: {a.get('skipped', 'compared')}; after: {b.get('skipped', 'compared')}"]
    notes = [f"sizes {_size(a)} -> {_size(b)} bytes"]
    la, lb = _lines(a), _lines(b)
    if la is not None and lb is not None:
        ranges = [f"{i1 + 1}-{i2}/{j1 + 1}-{j2}" for tag, i1, i2, j1, j2 in
                  difflib.SequenceMatcher(None, la, lb, autojunk=False).get_opcodes() if tag != "equal"]
        notes.append(f"lines (before/after) {', '.join(ranges[:8])}{' …' if len(ranges) > 8 else ''}")
    ca, cb = a.get("columns") or {}, b.get("columns") or {}
    if ca and cb:
        cols = sorted({k for k in ca.keys() | cb.keys() if ca.get(k) != cb.get(k)})
        notes.append(f"columns {', '.join(cols[:12])}{' …' if len(cols) > 12 else ''}")
    return notes


def describe_frames(a: str, b: str, width: int) -> list[str]:
    """Frames cell by cell: a changed header (columns, dtypes, attrs), then per differing row the columns
    that changed, `column: before -> after` (a line diff would cut the wide rows before the change)."""
    (head_a, *rows_a), (head_b, *rows_b) = a.split("\n"), b.split("\n")
    notes = []
    ha, hb = json.loads(head_a), json.loads(head_b)
    if ha["columns"] == hb["columns"] and ha["dtypes"] != hb["dtypes"]:
        notes += [f"dtype of {name}: {x} -> {y}"
                  for name, x, y in zip(ha["columns"], ha["dtypes"], hb["dtypes"], strict=True) if x != y]
    notes += [f"header {k}: {_short(ha.get(k), 50)} -> {_short(hb.get(k), 50)}"
              for k in sorted(ha.keys() | hb.keys()) if ha.get(k) != hb.get(k)
              and not (k == "dtypes" and ha["columns"] == hb["columns"])]
    if len(rows_a) != len(rows_b):
        notes.append(f"rows {len(rows_a)} -> {len(rows_b)}")
    for ra, rb in zip(rows_a, rows_b, strict=False):
        if ra != rb:
            va, vb = json.loads(ra), json.loads(rb)
            # compared as JSON text: NaN equals NaN here, as it does in the stored rows
            named = zip(["(index)", *ha["columns"]], va, vb, strict=False)
            cells = [f"{name}: {_pair(x, y)}" for name, x, y in named if json.dumps(x) != json.dumps(y)]
            notes.append(f"row {va[0]}: " + "; ".join(cells))
    return [line[: width + 60] for line in notes]  # wider: a row's changed cells on one line


def _pair(x: Any, y: Any, n: int = 28) -> str:
    """`before -> after` for one cell, long texts cut to a window around their first difference."""
    a, b = json.dumps(x, ensure_ascii=False), json.dumps(y, ensure_ascii=False)
    same = len(os.path.commonprefix([a, b]))
    start = max(0, same - 12) if max(len(a), len(b)) > n else 0
    cut = [("…" if start else "") + t[start:start + n] + ("…" if len(t) > start + n else "") for t in (a, b)]
    return f"{cut[0]} -> {cut[1]}"


def _short(value: Any, n: int) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= n else text[: n - 1] + "…"


def compare(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], skipped: set[str],
            lines: int) -> tuple[int, int, int]:
    """Print each differing (case, output); return (cases, outputs compared, outputs differing)."""
    outputs = differ = 0
    for key in sorted(before.keys() | after.keys()):
        a, b = before.get(key), after.get(key)
        if a is None or b is None:
            differ += 1
            print(f"DIFF {key}: case only in {'before' if b is None else 'after'}")
            continue
        for name in sorted(a.keys() | b.keys()):
            if name in skipped:
                continue
            outputs += 1
            if a.get(name) != b.get(name):
                differ += 1
                print(f"DIFF {key} [{name}]")
                shown = describe(a.get(name), b.get(name), 160)
                print(*(f"    {line}" for line in shown[:lines]), sep="\n")
                if len(shown) > lines:
                    print(f"    … {len(shown) - lines} more diff lines")
    return len(before.keys() | after.keys()), outputs, differ


# --------------------------------------------------------------------------- main

def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--before", help="git revision (or folder) of the tree before the change")
    p.add_argument("--after", default=str(REPO), help="folder or git revision after it (default: this tree)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes at once; each tree gets jobs // 2")
    p.add_argument("--only", help="only cases whose key contains SUBSTRING (a path, 'variant:', 'command:')")
    p.add_argument("--recheck", action="store_true",
                   help="render every chart and page twice, not only on the first inputs")
    p.add_argument("--diff-lines", type=int, default=DIFF_LINES, help="diff lines shown per differing output")
    p.add_argument("--keep", action="store_true", help="keep the run folder (fingerprints, worker logs)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--tree", help=argparse.SUPPRESS)
    p.add_argument("--scratch", help=argparse.SUPPRESS)
    p.add_argument("--shared", help=argparse.SUPPRESS)
    p.add_argument("--shard", default="0/1", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not args.worker and not args.before:
        p.error("--before REV is required")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.worker:
        return worker_main(args)
    shared = SHARED_FIXTURES.resolve() if SHARED_FIXTURES.is_dir() else None
    run = Path(tempfile.mkdtemp(prefix="same-outputs-"))
    started = time.monotonic()
    try:
        with tree_of(args.before, run, "before") as (before, b_label), tree_of(args.after, run, "after") as (
                after, a_label):
            print(f"before: {b_label}\nafter:  {a_label}\nshared fixtures: {shared or 'absent (skipped)'}")
            shards = run_workers({"before": before, "after": after}, args, run, shared)
        (b_cases, b_nd), (a_cases, a_nd) = read_side(shards["before"]), read_side(shards["after"])
        skipped = {**b_nd, **a_nd}
        for name, note in sorted(skipped.items()):
            print(f"note: {name} skipped for every input: {note}")
        cases, outputs, differ = compare(b_cases, a_cases, set(skipped), args.diff_lines)
        print(f"run time: {time.monotonic() - started:.0f} s")
        verdict = "all identical" if differ == 0 else f"{differ} differ"
        print(f"{cases} inputs, {outputs} outputs compared: {verdict}")
        return 0 if differ == 0 else 1
    finally:
        if args.keep:
            print(f"run folder kept: {run}")
        else:
            shutil.rmtree(run, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
