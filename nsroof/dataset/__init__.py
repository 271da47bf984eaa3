"""Many exports into one dataset folder that every Parquet reader loads (pandas, pyarrow, DuckDB,
polars, nsroof.load). Modules, each importing only those above it in this list and the layers
below (pipeline, report):

  discover  which files the inputs name (folders recursed, exports picked by content)
  identity  rank, host and the `source` key of each input, from evidence only
  task      the per-file work in a worker: analyze, write the part file(s), return a small Outcome
  results   the run's result, `_nsroof_dataset.json`, the terminal summary
  run       analyze_many: the local process pool and the Dask executor

The folder layout and its reader (`load`) are in nsroof.report.parquet.
"""

from __future__ import annotations

from nsroof.dataset.discover import Discovery, Failure, Skipped, discover
from nsroof.dataset.results import DatasetResult
from nsroof.dataset.run import analyze_many
from nsroof.dataset.task import Outcome, Task, plan

__all__ = ["DatasetResult", "Discovery", "Failure", "Outcome", "Skipped", "Task", "analyze_many", "discover",
           "plan"]
