"""``nsroof.profile()``: torch.profiler around a region, its chrome trace kept, read back as a roofline
report.

    with nsroof.profile(machine="h100-sxm", trace="run.trace.json.gz") as prof:
        train_step()
    prof.report        # the report DataFrame, nsroof.schema.COLUMNS, level "dram"
    prof.result.trace  # the kineto trace: open it in Perfetto, TensorBoard or HTA; `nsroof analyze` it

One correlation path. On exit the profiler's chrome trace is exported (``export_chrome_trace``) and the
report is built from that file by the same importer and pipeline as ``nsroof analyze trace.json.gz``
(nsroof.importers.trace.kineto; the rules are in nsroof.importers.trace.op_tree): no second kernel <-> op
correlation over FunctionEvents. Rows: on CUDA one per GPU activity (kernels classified, memcpy/memset
kept with their kind, never as compute); on CPU one per op call not inside a costed op.

What the trace lacks goes into it through torch's own means:
  * shapes, dtypes and concrete arguments of every op: ``record_shapes=True``;
  * module and range paths: every nsroof range opens a ``record_function`` (a ``user_annotation`` in the
    trace) and (``modules=True``) every nn.Module forward torch's C++ ``_RecordFunctionFast`` (a ``cpu_op``
    named by the module, read as a range through the ``module_ranges`` fact); backward ops inherit their
    forward op's path through the trace's ``Sequence number`` (nsroof.importers.trace.op_tree);
  * Inductor's per-kernel estimates (``kernel_flop``, ``kernel_num_gb``): ``benchmark_kernel`` on for the run;
  * what Inductor fused into each kernel it generates during the run (its ATen nodes with shapes and module
    paths, the buffers it reads and writes: nsroof.collectors.inductor_kernels), under the facts' ``inductor``
    key; Inductor's caches are off for the run so every graph is generated (and recorded);
  * step boundaries: zero-length ``nsroof::step#<source>#<n>`` record_functions, at ``nsroof.step()`` or
    at every optimizer step (a global optimizer post-hook);
  * facts: ``prof.add_metadata_json("nsroof", …)`` before the profiler stops — the module range names, the
    step window asked for (``steps``/``warmup``), the TF32 settings in force (matmul precision and
    ``allow_tf32`` flags, cuDNN ``allow_tf32``; the ``fp32_precision`` API first), the device and torch
    version. The importer reads them back, so the saved trace re-analyzed later gives the same report.

Costs are analytic (nsroof.costs.ledger.aten, the ledger's formulas): flops by precision, compulsory bytes
at level dram (bytes_source ``analytic:<formula>``). An op without a formula or without recorded shapes gets
NaN and says why in ``missing``.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import platform
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from nsroof.collectors.compile_settings import (
    compile_note,
    graph_caches_off,
    inductor_records_on,
    wrapper_rows,
)
from nsroof.errors import NsroofError
from nsroof.report.summary import above_causes
from nsroof.roofs.machines import Machine

STEP_MARKER = "nsroof::step"
META_VERSION = 1


@dataclass
class ProfileResult:
    report: pd.DataFrame
    machine: Machine | None
    trace: Path
    warnings: list[str] = field(default_factory=list)
    steps_marked: int = 0
    step_source: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)  # what the Parquet file's metadata holds
    trace_facts: dict[str, Any] = field(default_factory=dict)  # what nsroof recorded in the trace
    step_window: str = ""  # the steps kept, when --steps/--warmup selected a window
    # the op-level view (one row per costed op call), written beside the report
    ops: pd.DataFrame | None = None
    rebuild: str = ""  # the `nsroof analyze` command that makes this report again from the trace

    def __repr__(self) -> str:  # one line: the rows and metadata are large (read .report, .metadata)
        return (f"ProfileResult({len(self.report)} rows, "
                f"machine={self.machine.name if self.machine else None!r}, "
                f"trace={str(self.trace)!r}, {self.steps_marked} steps marked, "
                f"{len(self.warnings)} warning(s))")


# --------------------------------------------------------------------------- the context manager


def quiet_kineto() -> Any:
    """Kineto's `USDT: … profiler_start/stop` lines (written from C++ to file descriptor 2 as the profiler
    starts and stops) dropped; any other output passes unchanged (nsroof.collectors.script.filtered_stderr).
    The Python API's output stays the user's own, as the CLI's does."""
    from nsroof.collectors.script import filtered_stderr

    return filtered_stderr()


class profile:  # noqa: N801 - used like a function: `with nsroof.profile() as p:`
    """torch.profiler (CPU, plus CUDA when available; shapes recorded) whose exit builds the report from
    the chrome trace it saves.

    machine: a Machine, a machine name or JSON path; default: the datasheet entry of the CUDA device, or
    on CPU the measured CPU profile (nsroof.collectors.measure.cpu_profile, cached after the first run;
    remeasure=True measures it anew and replaces the cached one).
    steps / warmup: record `steps` steps after skipping `warmup` (see the module docstring); the profiler
    stops once they are recorded.
    window_optional: the window is a default rather than asked for: a run that marks no more than `warmup`
    steps (a script without optimizer steps or nsroof.step()) is kept whole, with a note.
    modules: open a range per nn.Module call (global module hooks) so rows carry their module.
    trace: where to save the chrome trace (``.json`` or ``.json.gz``); default: a new temporary folder.
    """

    def __init__(
        self,
        *,
        machine: Machine | str | os.PathLike[str] | None = None,
        steps: int | None = None,
        warmup: int = 0,
        cuda: bool | None = None,
        modules: bool = True,
        trace: str | os.PathLike[str] | None = None,
        window_optional: bool = False,
        captures: Sequence[str | os.PathLike[str]] = (),
        remeasure: bool = False,
        compile_steps: bool = False,
    ) -> None:
        if steps is not None and steps < 1:
            raise NsroofError(f"steps must be >= 1, got {steps}")
        if warmup < 0:
            raise NsroofError(f"warmup must be >= 0, got {warmup}")
        self.machine_spec = machine
        self.steps = steps
        self.warmup = warmup
        self.cuda = cuda
        self.modules = modules
        self.trace = Path(trace) if trace is not None else None
        self.window_optional = window_optional
        self.remeasure = remeasure  # the CPU profile is measured anew, not read from the cache
        # keep the steps in which torch.compile compiled (by default they are warm-up: left out of the report,
        # and one more step recorded for each such step of the window)
        self.compile_steps = compile_steps
        self._compiled_steps = 0
        self._kernels_seen = 0
        # traces recorded around the capture of the CUDA/HIP graphs the run replays
        # (nsroof.importers.trace.graphs)
        self.captures = [Path(c) for c in captures]
        self.notes: list[str] = []
        self.result: ProfileResult | None = None
        self._prof: Any = None
        self._cleanup: list[Any] = []
        self._counts = {"nsroof": 0, "optimizer": 0}
        self._stopped = False
        self._facts: dict[str, Any] = {}
        # what Inductor knew of each kernel it generated during the run (nsroof.collectors.inductor_kernels)
        from nsroof.collectors.inductor_kernels import Recorder

        self._inductor = Recorder()
        self.interrupted_trace: Path | None = None  # the trace saved when Ctrl-C ended the run
        # for the command that rebuilds the report (nsroof.collectors.rebuild): options that changed the
        # costing (--model-config, --formulas) and where the CLI writes the report
        self.rebuild_options: list[str] = []
        self.report_path: Path | None = None

    # -- public results
    @property
    def report(self) -> pd.DataFrame:
        if self.result is None:
            raise NsroofError("the profile is not finished: read .report after the `with` block")
        return self.result.report

    def __enter__(self) -> profile:
        import torch
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile

        from nsroof.collectors import inductor_kernels, nested_profiler, nvtx_ranges

        if _profiler_enabled(torch):
            raise NsroofError("a torch profiler is already recording in this process, and torch runs one at "
                              "a time: stop it before nsroof.profile starts, or profile with one of them")
        if self.machine_spec is not None and not isinstance(self.machine_spec, Machine):
            # a wrong --machine is said before the run, not after it
            self.machine_spec = resolve_machine(self.machine_spec, cuda=False, warnings=[])
        use_cuda = torch.cuda.is_available() if self.cuda is None else self.cuda
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if use_cuda else [])
        self._use_cuda = use_cuda
        self._prof = torch_profile(activities=activities, record_shapes=True)
        self._cleanup.append(inductor_records_on())
        self._cleanup.append(graph_caches_off())
        self._cleanup.append(inductor_kernels.install(self._inductor))
        self._cleanup.append(nvtx_ranges.add_step_listener(lambda n: self._boundary("nsroof")))
        from torch.optim.optimizer import register_optimizer_step_post_hook

        handle = register_optimizer_step_post_hook(
            lambda opt, args, kwargs: self._boundary("optimizer"))
        self._cleanup.append(handle.remove)
        if self.modules:
            # Forward ranges only: backward ops are attributed through autograd sequence numbers.
            self._cleanup.append(nvtx_ranges.annotate_all_modules(backward=False).remove)
        with quiet_kineto():
            self._prof.__enter__()
        # a profiler the profiled code starts from here on is made a no-op, with one warning (its start would
        # take over this session and its stop end it: the process then dies in kineto, nothing saved)
        self._cleanup.append(nested_profiler.install(self._prof.profiler, lambda: not self._stopped,
                                                     self._nested_profiler_note))
        return self

    def _nested_profiler_note(self, note: str) -> None:
        self.notes.append(note)
        print(f"nsroof: warning: {note}", file=sys.stderr, flush=True)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self._stop()
        finally:
            for undo in reversed(self._cleanup):
                undo()
            self._cleanup.clear()
        if exc_type is not None:
            if issubclass(exc_type, KeyboardInterrupt) and self._prof is not None:
                self.interrupted_trace = self._save_trace()  # Ctrl-C: keep what was recorded so far
            return
        self.result = self._build()

    # -- steps
    def _boundary(self, source: str) -> None:
        if self._stopped:
            return
        self._counts[source] += 1
        from torch.autograd.profiler import record_function

        with record_function(f"{STEP_MARKER}#{source}#{self._counts[source]}"):
            pass
        generated = self._inductor.generated()
        if (generated > self._kernels_seen and not self.compile_steps and self.steps is not None
                and self._marked() > self.warmup):
            self._compiled_steps += 1  # Inductor generated kernels in this step of the window: a compile step
        self._kernels_seen = generated
        if self.steps is not None:
            if self._marked() >= self.warmup + self.steps + self._compiled_steps:
                self._stop()

    def _stop(self) -> None:
        if not self._stopped and self._prof is not None:
            self._stopped = True
            self._keep_whole_run_if_too_short()
            try:
                # the facts go in while the profiler still records: kineto takes metadata only then
                self._facts = trace_facts(cuda=self._use_cuda, steps=self.steps, warmup=self.warmup)
                self._facts["steps"] |= {"compile_steps": "keep" if self.compile_steps else "skip",
                                         "compile_extended": self._compiled_steps}
                if self._inductor.kernels or self._inductor.unreadable:
                    self._facts["inductor"] = self._inductor.facts()
                self._prof.add_metadata_json("nsroof", json.dumps(self._facts))
            except Exception as exc:  # noqa: BLE001 - a fact that cannot be read must not lose the run
                self._facts = {"version": META_VERSION, "collector": "nsroof.profile",
                               "facts_error": f"{type(exc).__name__}: {exc}"}
                self._prof.add_metadata_json("nsroof", json.dumps(self._facts))
            finally:
                with quiet_kineto():
                    self._prof.__exit__(None, None, None)

    def _marked(self) -> int:
        return self._counts["nsroof"] or self._counts["optimizer"]

    def _keep_whole_run_if_too_short(self) -> None:
        if self.window_optional and (self.steps is not None or self.warmup) and self._marked() <= self.warmup:
            self.notes.append(f"the run marked {self._marked()} step(s), not more than the {self.warmup} "
                              "warm-up step(s) of the default schedule: the whole run is recorded")
            self.steps, self.warmup = None, 0

    # -- building the report: the saved trace through the importer and the pipeline
    def _save_trace(self) -> Path:
        trace = self.trace or Path(tempfile.mkdtemp(prefix="nsroof-profile-")) / "trace.json.gz"
        trace.parent.mkdir(parents=True, exist_ok=True)
        save_trace(self._prof, trace)
        return trace

    def _build(self) -> ProfileResult:
        from nsroof import pipeline
        from nsroof.collectors.rebuild import for_session

        trace = self._save_trace()
        warnings: list[str] = []
        machine = None
        try:
            machine = resolve_machine(self.machine_spec, cuda=self._use_cuda, warnings=warnings,
                                      remeasure=self.remeasure)
            built = pipeline.analyze([trace], machine=machine, captures=self.captures)
        except Exception as exc:  # noqa: BLE001 - the run is in the trace: say how to get its report
            why = str(exc) if isinstance(exc, NsroofError) else f"{type(exc).__name__}: {exc}"
            raise NsroofError(f"{why.rstrip('.')}; the profile's trace is kept: "
                              f"`{for_session(self, trace, machine)}` rebuilds the report from it") from exc
        steps_info = _file_extra(built).get("steps", {})
        source, marked = str(steps_info.get("source", "")), int(steps_info.get("marked", 0))
        if (self.steps is not None or self.warmup) and built.frame.empty:
            # numbered as the report's `step` column numbers its rows: the first step is 1
            asked = steps_info.get("window") or (
                f"{self.warmup + 1}..{self.warmup + self.steps if self.steps else 'end'}")
            raise NsroofError(
                f"no ops recorded in steps {asked}: the run "
                f"marked {marked} step(s) ({source or 'no optimizer step and no nsroof.step()'}) — lower "
                "--warmup, or call nsroof.step() at the end of each step")
        warnings += self.notes + built.warnings
        window = (f"; recorded steps {steps_info['window']}: {steps_info['kept']} of {steps_info['rows']} "
                  "rows" if "window" in steps_info else "") + compile_note(steps_info)
        return ProfileResult(built.frame, machine, trace, warnings, marked, source, built.metadata,
                             self._facts, window, built.ops,
                             for_session(self, trace, machine, with_output=False))


def _profiler_enabled(torch: Any) -> bool:
    """Whether a torch profiler (kineto, or emit_nvtx/emit_itt) records in this process now."""
    enabled = getattr(torch.autograd, "_profiler_enabled", None)
    return bool(enabled()) if callable(enabled) else False


# zlib's fastest level: the launch-bound bench's 3 MB trace in 9-17 ms, 0.25 MB; level 6 (zlib's default)
# took 16-41 ms for 0.17 MB, 9 (gzip.open's default) 5× longer again; the report waits for this file
TRACE_GZIP_LEVEL = 1


def save_trace(prof: Any, trace: Path) -> None:
    """The chrome trace, written once: kineto's own JSON writer, then for ``.gz`` one gzip pass over the
    whole file. torch's export_chrome_trace(".json.gz") gzips it line by line at level 9, the larger part of
    its time on a launch-bound run."""
    from nsroof.atomic import atomic_path

    with atomic_path(trace) as tmp:
        if trace.suffix != ".gz":
            prof.export_chrome_trace(str(tmp.with_suffix(".json")))
            tmp.with_suffix(".json").replace(tmp)
            return
        plain = tmp.with_suffix(".json")
        try:
            prof.export_chrome_trace(str(plain))
            tmp.write_bytes(gzip.compress(plain.read_bytes(), compresslevel=TRACE_GZIP_LEVEL, mtime=0))
        finally:
            plain.unlink(missing_ok=True)


def _file_extra(built: Any) -> dict[str, Any]:
    """The importer's facts about the one trace (the step window it applied, TF32), as the report's
    metadata records them under its input."""
    inputs = built.metadata.get("inputs") or [{}]
    facts = inputs[0].get("facts") if isinstance(inputs[0], dict) else None
    return dict(facts) if isinstance(facts, dict) else {}


def trace_facts(*, cuda: bool, steps: int | None, warmup: int) -> dict[str, Any]:
    """What nsroof records in the trace (top-level key 'nsroof'): see the module docstring."""
    import torch

    from nsroof.collectors.nvtx_ranges import MODULE_RANGE_NAMES

    facts: dict[str, Any] = {
        "version": META_VERSION,
        "collector": "nsroof.profile",
        "torch": str(torch.__version__),
        "module_ranges": sorted(n for n in MODULE_RANGE_NAMES),
        "steps": {"warmup": warmup, "steps": steps},
        "tf32": tf32_settings(),
    }
    if cuda:
        index = torch.cuda.current_device()
        facts["device"] = str(torch.cuda.get_device_name(index))
    else:
        facts["cpu"] = cpu_name()
    return facts


def tf32_settings() -> dict[str, Any]:
    """The TF32 settings in force, read from torch's current API where it is set, else from the legacy one,
    never raising (torch raises when a legacy getter meets a value set through the new API).

    New API (torch >= 2.9): ``torch.backends.cuda.matmul.fp32_precision`` and
    ``torch.backends.cudnn.conv.fp32_precision`` ('tf32' allows TF32, 'ieee' forbids it, 'none' inherits from
    ``torch.backends.cudnn.fp32_precision`` (convolutions) and ``torch.backends.fp32_precision``). Legacy API,
    read only when the new one says 'none' all the way up: matmul TF32 follows
    ``torch.get_float32_matmul_precision()`` ('highest' forbids it) or
    ``torch.backends.cuda.matmul.allow_tf32``; convolutions follow ``torch.backends.cudnn.allow_tf32``."""
    import torch

    backends = torch.backends
    matmul_new = _new_api_precision(backends, ("cuda", "matmul"))
    conv_new = _new_api_precision(backends, ("cudnn", "conv"), ("cudnn",))
    out: dict[str, Any] = {"matmul_fp32_precision": matmul_new, "conv_fp32_precision": conv_new}
    # the legacy getter raises once the new API set a value; its answer then follows from the new value
    precision = str(_quietly(torch.get_float32_matmul_precision,
                             "high" if matmul_new == "tf32" else "highest"))
    out["matmul_precision"] = precision
    if matmul_new != "none":
        out |= {"matmul": matmul_new == "tf32", "matmul_api": "torch.backends.cuda.matmul.fp32_precision"}
    else:
        flag = bool(_quietly(lambda: backends.cuda.matmul.allow_tf32, False))
        out |= {"matmul": precision != "highest" or flag, "cuda_matmul_allow_tf32": flag,
                "matmul_api": "legacy"}
    if conv_new != "none":
        out |= {"cudnn": conv_new == "tf32", "cudnn_api": "torch.backends.cudnn.conv.fp32_precision"}
    else:
        out |= {"cudnn": bool(_quietly(lambda: backends.cudnn.allow_tf32, True)), "cudnn_api": "legacy"}
    return out


def _new_api_precision(backends: Any, *paths: tuple[str, ...]) -> str:
    """The first fp32_precision other than 'none' along `paths` then the generic one; 'none' when all are
    unset (or this torch has no such API)."""
    for path in (*paths, ()):
        obj = backends
        for part in path:
            obj = getattr(obj, part, None)
        value = str(_quietly(lambda obj=obj: getattr(obj, "fp32_precision", "none"), "none"))
        if value != "none":
            return value
    return "none"


def _quietly(read: Any, default: Any) -> Any:
    try:
        return read()
    except (RuntimeError, AttributeError):
        return default


# --------------------------------------------------------------------------- machine


def resolve_machine(spec: Machine | str | os.PathLike[str] | None, *, cuda: bool, warnings: list[str],
                    remeasure: bool = False) -> Machine | None:
    from nsroof.roofs import machines

    if isinstance(spec, Machine):
        return spec
    if spec is not None:
        return machines.load(os.fspath(spec))
    if cuda:
        import torch

        from nsroof.collectors.measure.cache import cached_gpu_profile

        name = torch.cuda.get_device_name()
        # the device's own measured roofline when `nsroof measure --device cuda` cached one, else its
        # datasheet
        found = cached_gpu_profile(name) or machines.lookup_device(name)
        if found is None:
            warnings.append(f"{machines.unknown_device(name)}: pass --machine or run "
                            "`nsroof measure --device cuda` (its profile is cached and used from then on)")
        return found
    try:
        from nsroof.collectors.measure import cpu_profile
    except ImportError:
        warnings.append("no CPU machine profile (nsroof.collectors.measure is not available): pass --machine")
        return None
    return cpu_profile(remeasure=remeasure)


def cpu_profile_pending(remeasure: bool = False) -> str:
    """Where the CPU profile will be cached when it still has to be measured ('' when a usable one is
    cached and not `remeasure`, or when the measuring module is not there)."""
    try:
        from nsroof.collectors.measure.cache import cpu_cache_path, read_cpu_profile
    except ImportError:
        return ""
    path = cpu_cache_path()
    return "" if not remeasure and read_cpu_profile(path)[0] is not None else str(path)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


# --------------------------------------------------------------------------- the terminal summary


def coverage(report: pd.DataFrame) -> float:
    """Share of the op time whose row has an analytic cost. The op time leaves out torch.compile's wrappers'
    own time (wrapper_overhead): containers whose self time is overhead, not an op's work."""
    d = report["duration_s"].astype("float64").fillna(0.0)
    ops = d[~wrapper_rows(report)]
    total = ops.sum()
    return float(ops[report["flops"].notna()].sum() / total) if total > 0 else math.nan


def render_summary(result: ProfileResult | pd.DataFrame, *, top: int = 10, output: str | None = None,
                   width: int | None = None) -> str:
    """Top ops by time with their bound, the share of time memory-/compute-bound, and the coverage; the
    tables fitted to `width` (default: the terminal's), names cut where distinct ones stay distinct."""
    from nsroof.report.summary import terminal_width
    from nsroof.units import human_time

    width = width or terminal_width()

    report = result.report if isinstance(result, ProfileResult) else result
    if report.empty:
        return "no ops recorded"
    machine = result.machine if isinstance(result, ProfileResult) else None
    d = report["duration_s"].astype("float64").fillna(0.0)
    total = float(d.sum())
    lines = [f"{len(report)} op rows, {human_time(total)} profiled by torch.profiler on "
             f"{', '.join(sorted(set(report['device'].astype(str))))}"]
    ceilings = sorted(set(report["ceiling_source"].astype(str)))
    lines.append(f"ceilings: {', '.join(ceilings)}" + (f" ({machine.name})" if machine is not None else ""))
    if output:
        lines.append(f"report: {output}")
    if isinstance(result, ProfileResult) and result.rebuild:
        lines.append(f"trace: {result.trace} (`{result.rebuild}` makes this report again)")
    from nsroof.report.breakdown import category_lines, phase_lines, step_lines
    from nsroof.report.op_tables import module_table, op_table, top_modules, top_ops

    # the first screen, as `nsroof analyze` prints it: where the time went by category, per step, per phase
    metadata = result.metadata if isinstance(result, ProfileResult) else {}
    for part in (category_lines(report, width), step_lines(metadata, width), phase_lines(report)):
        lines += ["", *part] if part else []
    lines.append("")
    lines += op_table(top_ops(report, top), width)
    lines += module_table(top_modules(report, 5), width)
    lines.append("")
    shares = {b: float(d[report["bound"].astype(str) == b].sum() / total) if total > 0 else math.nan
              for b in ("memory", "compute", "unknown")}
    lines.append("Share of time: " + ", ".join(f"{b}-bound {shares[b]:.1%}" if b != "unknown"
                                               else f"unknown {shares[b]:.1%}"
                                               for b in ("memory", "compute", "unknown")))
    wrappers = wrapper_rows(report)
    lines.append(f"Coverage: {coverage(report):.1%} of the {'op ' if wrappers.any() else ''}time is in ops "
                 "with an analytic formula")
    if wrappers.any():
        w = float(d[wrappers].sum())
        names = ", ".join(sorted(set(report.loc[wrappers, "op"].astype(str)))[:4])
        lines.append(f"  not op time: torch.compile's wrappers' own time, {human_time(w)} ({w / total:.1%}; "
                     f"{names}): overhead around the compiled regions, whose kernels are rows of their own")
    missing = report.loc[report["flops"].isna() & ~wrappers, ["missing", "duration_s"]].copy()
    if len(missing):
        missing["why"] = missing["missing"].astype(str).str.split(",").str[0]
        worst = missing.groupby("why")["duration_s"].sum().sort_values(ascending=False).head(3)
        lines.append("  largest uncovered: "
                     + "; ".join(f"{why} ({human_time(t)})" for why, t in worst.items()))
    above = report["above_roof"].astype(bool)
    if above.any():
        lines.append(f"Above a roof: {int(above.sum())} rows ({float(d[above].sum() / total):.1%} of the "
                     "time) beat the DRAM roof or the compute peak; the likely cause, for the ops with most "
                     "such time (`above_roof_cause`, of each op's longest such row):")
        lines += above_causes(report[above], total)
    if isinstance(result, ProfileResult):
        if result.step_source:
            lines.append(f"Steps: {result.steps_marked} marked ({result.step_source}){result.step_window}")
        lines.extend(f"warning: {w}" for w in result.warnings)
    return "\n".join(lines)
