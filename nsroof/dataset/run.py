"""`analyze_many`: every input into one dataset folder, on a local process pool or a Dask cluster.

    result = analyze_many(["runs/", "extra/*.ncu-rep"], "dataset/", jobs=2)
    result.exit_code          # 0 when every input landed, 1 when any failed
    pandas.read_parquet("dataset/")   # or nsroof.load("dataset/", filters=[("rank", "=", 0)])

Inputs that name nothing to analyze (a missing path, a glob that matches nothing, a folder without
an export) are an InputError before anything is written; an input that fails while analyzed is
listed in the result while the others land.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from nsroof.dataset.discover import Failure, Skipped, discover
from nsroof.dataset.results import DatasetResult, write_summary
from nsroof.dataset.task import Outcome, Task, plan, run_task
from nsroof.errors import InputError, NsroofError

ProgressFn = Callable[[Outcome, int, int], None]


def analyze_many(
    inputs: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    jobs: int | None = None,
    executor: str = "local",
    scheduler: Any = None,
    overwrite: bool = False,
    machine: Any = None,
    aggregate: bool = False,
    name_template: str | None = None,
    progress: ProgressFn | bool | None = None,
    model_config: Any = None,
    formulas: Sequence[str | os.PathLike[str]] = (),
) -> DatasetResult:
    """Analyze every input into one dataset folder at `out_dir`.

    executor "local": a process pool of `jobs` workers (default: the number of cores; 1 runs in
    this process). executor "dask": the same per-file work on the Dask cluster at `scheduler`
    (an address such as tcp://host:8786, or a distributed.Client / LocalCluster).
    `model_config` (a config.json path or a ModelConfig; default: the running command's --model-config) and
    `formulas` (@nsroof.formula files, beside those already loaded) reach every worker (on Dask the files
    must exist at the same paths on the workers)."""
    t0 = time.perf_counter()
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    if not inputs:
        raise NsroofError("no inputs given — pass exports, globs or folders")
    if executor not in ("local", "dask"):
        raise NsroofError(f"unknown executor {executor!r} — use 'local' or 'dask'")
    if executor == "dask" and scheduler is None:
        raise NsroofError("--executor dask needs --scheduler ADDRESS (e.g. tcp://10.0.0.1:8786)")
    out = os.fspath(out_dir)
    if out.rstrip("/").lower().endswith(".parquet") and not Path(out).is_dir():
        raise InputError(out, "several inputs make a dataset, which is a folder, not one .parquet file",
                         hint="use -o DIR (e.g. -o dataset/), or analyze one export at a time")
    if "://" not in out and Path(out).exists() and not Path(out).is_dir():
        raise InputError(out, "output exists and is not a directory", hint="-o DIR names a dataset folder")
    if machine is not None and not _is_machine(machine):
        from nsroof.roofs import machines as _machines

        machine = _machines.resolve(os.fspath(machine))  # fail fast, once, on a bad --machine
    model, formula_files = _cost_facts(model_config, formulas)
    found = discover(inputs)
    _check_found(found.failures, found.skipped)
    if "://" not in out:
        Path(out).mkdir(parents=True, exist_ok=True)
    roots = [Path(os.fspath(i)) for i in inputs if Path(os.fspath(i)).is_dir()]
    tasks = plan(found.files, out, roots=roots, name_template=name_template, machine=machine,
                 aggregate=aggregate, overwrite=overwrite, model=model, formulas=formula_files)
    n = len(tasks)
    report = _progress_fn(progress)
    outcomes: list[Outcome] = []

    def collect(o: Outcome) -> None:
        outcomes.append(o)
        if report:
            report(o, len(outcomes), n)

    workers = max(1, jobs if jobs is not None else (os.cpu_count() or 1))
    if executor == "dask":
        _run_dask(tasks, scheduler, collect)
    elif workers == 1 or n <= 1:
        for t in tasks:
            collect(run_task(t))
    else:
        _run_pool(tasks, min(workers, n), collect)

    order = {t.path: i for i, t in enumerate(tasks)}
    outcomes.sort(key=lambda o: order[o.input])
    result = DatasetResult(out_dir=out, outcomes=outcomes,
                           failures=[Failure(o.input, o.error) for o in outcomes if not o.ok],
                           executor=executor, jobs=workers if executor == "local" else 0,
                           wall_s=time.perf_counter() - t0, skipped=found.skipped)
    result.summary_path = write_summary(result)
    return result


def _check_found(failures: Sequence[Failure], skipped: Sequence[Skipped]) -> None:
    """A spec that names nothing to analyze is a typo or a wrong folder: say so before writing anything."""
    if not failures:
        return
    first = failures[0]
    more = f" ({len(failures) - 1} more input(s) name nothing either)" if len(failures) > 1 else ""
    near = ([s for s in skipped if Path(s.input).is_relative_to(first.input)] if Path(first.input).is_dir()
            else [])
    hint = (f"it holds {len(near)} export-named file(s) of another kind, e.g. {near[0].input}; name one "
            "explicitly to analyze it anyway" if near
            else "pass ncu CSV / text exports, .ncu-rep reports or torch traces")
    raise InputError(first.input, f"{first.error}, nothing to analyze{more}", hint=hint)


def _cost_facts(model_config: Any, formulas: Sequence[str | os.PathLike[str]]) -> tuple[Any, tuple[str, ...]]:
    """The model facts and formula files every worker costs with: read (and checked) here, once, so a bad file
    fails before anything is written; the running command's own (--model-config, --formulas) by default."""
    from nsroof.costs.ledger import custom
    from nsroof.costs.ledger.engine_context import read_model_config

    for path in formulas:
        custom.load_file(os.fspath(path))
    if isinstance(model_config, (str, os.PathLike)):
        model_config = read_model_config(os.fspath(model_config))
    return ((model_config if model_config is not None else custom.default_model()),
            tuple(custom.loaded_files()))


def _is_machine(obj: Any) -> bool:
    from nsroof.roofs.machines import Machine

    return isinstance(obj, Machine)


def _run_pool(tasks: Sequence[Task], workers: int, collect: Callable[[Outcome], None]) -> None:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # forkserver: workers start from a clean single-threaded server, never from a parent that may
    # already run pyarrow/dask threads (fork would copy their locks); the preload makes each start cheap.
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["nsroof.dataset.task", "nsroof.pipeline", "pandas", "pyarrow.parquet"])
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker) as pool:
        futures = {pool.submit(run_task, t): t for t in tasks}
        for fut in as_completed(futures):
            task = futures[fut]
            try:
                collect(fut.result())
            except Exception as exc:  # noqa: BLE001 - a worker that died (OOM, signal) fails its input only
                collect(Outcome(input=task.path, source=task.source, ok=False,
                                error=f"{task.path}: worker failed ({type(exc).__name__}: {exc})"))


def _init_worker() -> None:
    """Parallelism comes from the processes: one Arrow thread each, or N workers x N CSV threads
    oversubscribe the cores (measured: -j 2 slower than -j 1 on 2 cores before this)."""
    import pyarrow

    pyarrow.set_cpu_count(1)
    pyarrow.set_io_thread_count(1)


def _run_dask(tasks: Sequence[Task], scheduler: Any, collect: Callable[[Outcome], None]) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError:
        from nsroof.errors import ToolNotFoundError

        raise ToolNotFoundError(
            "--executor dask needs dask[distributed]: pip install 'dask[distributed]'") from None
    own = not isinstance(scheduler, Client)
    if own:
        address = getattr(scheduler, "scheduler_address", scheduler)
        try:
            client = Client(address, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise NsroofError(f"cannot reach the Dask scheduler at {address} ({exc}) — start one with "
                              "`dask scheduler` and workers with `dask worker ADDRESS`") from None
    else:
        client = scheduler
    try:
        futures = client.map(run_task, list(tasks), pure=False,
                             key=[f"nsroof-{i}-{os.path.basename(t.path)}" for i, t in enumerate(tasks)])
        by_key = {f.key: t for f, t in zip(futures, tasks, strict=True)}
        for fut in as_completed(futures):
            try:
                collect(fut.result())
            except Exception as exc:  # noqa: BLE001 - a lost worker fails its input only
                task = by_key[fut.key]
                collect(Outcome(input=task.path, source=task.source, ok=False,
                                error=f"{task.path}: Dask worker failed ({type(exc).__name__}: {exc})"))
    finally:
        if own:
            client.close()


def _progress_fn(progress: ProgressFn | bool | None) -> ProgressFn | None:
    if progress is True:
        def bar(o: Outcome, done: int, total: int) -> None:
            width = 30
            fill = int(width * done / max(total, 1))
            status = "ok" if o.ok else "FAILED"
            sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} {status:6} "
                             f"{os.path.basename(o.input)[:40]:40}")
            if done == total:
                sys.stderr.write("\n")
            sys.stderr.flush()

        return bar
    return progress or None
