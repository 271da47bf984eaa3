"""nsroof's tables, declared once with their units.

- the kernel table every importer returns (IDENTITY_COLUMNS, plus profiler metrics under their own
  ncu names in SI base units) and the file facts returned beside it (FileFacts);
- the report: one row per (kernel launch, memory level), REPORT_FIELDS. Every field carries its unit
  and meaning in the Parquet field metadata; the column table of docs/readme/report.md is generated
  from REPORT_FIELDS (tests keep them in step).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from nsroof import markdown

SCHEMA_VERSION = "1"
LEVELS: tuple[str, ...] = ("dram", "l2", "l1")
# The report level of a collective whose cost is analytic: its bytes are the bus bytes it moves over the GPU's
# links (nccl-tests busbw), judged against the interconnect bandwidth per direction; its row stands where the
# DRAM row would (nsroof.roofs.classify).
LINK_LEVEL = "link"
BOUNDS: tuple[str, ...] = ("memory", "compute", "unknown")
PRECISIONS: tuple[str, ...] = ("fp64", "fp32", "fp16", "tensor")

# ---------------------------------------------------------------------------------------------
# The kernel table: what every importer's `read(path)` returns, one row per kernel launch (or per
# op call for analytic sources). Every other column whose name contains "__" is a profiler metric
# under its own ncu name (e.g. ``dram__bytes.sum``), converted to SI base units as float64 (bytes,
# seconds, Hz, FLOP, cycles, instructions, sectors ...); string-valued metrics stay strings.
# ---------------------------------------------------------------------------------------------

# name -> (pandas dtype, description). Importers fill what the input holds; the rest is NA.
IDENTITY_COLUMNS: dict[str, tuple[str, str]] = {
    "source": ("object", "input file name (a live profile: the chrome trace it saved)"),
    "kernel_id": ("int64", "launch ID as printed by the profiler (ncu 'ID'); unique within a source"),
    "process_id": ("Int64", "OS process ID"),
    "process_name": ("object", "process name"),
    "host": ("object", "host name"),
    "device": ("object", "device name, e.g. 'NVIDIA A100-SXM4-40GB' ('' when the export omits it)"),
    "device_id": ("Int64", "device index"),
    "cc": ("object", "compute capability, e.g. '8.0' ('' when unknown)"),
    "kernel_name": ("object", "kernel name exactly as printed"),
    "function": ("object", "short function name: no return type, template arguments or parameter list"),
    "grid": ("object", "grid size '(x, y, z)'"),
    "block": ("object", "block size '(x, y, z)'"),
    "context": ("Int64", "CUDA context ID"),
    "stream": ("Int64", "CUDA stream ID"),
    "nvtx_ranges": ("object", "list of NVTX range names enclosing the launch, outermost first"),
    "nvtx_path": ("object", "the NVTX range names joined with '/' ('' when none)"),
}

# Beside them, the torch-trace importer adds `step` (Int64): the training step a row ran in, counted from 1
# from the trace's nsroof.step() / optimizer-step marks (the report's `step` column, REPORT_FIELDS).

# The Nsight Compute CSV/text export's column -> the identity column above it fills (raw names as ncu
# prints them in the header of `--csv` exports; `Kernel Name` also yields `function`, NVTX columns yield
# nvtx_ranges/nvtx_path).
NCU_IDENTITY_COLUMNS: dict[str, str] = {
    "ID": "kernel_id",
    "Process ID": "process_id",
    "Process Name": "process_name",
    "Host Name": "host",
    "Kernel Name": "kernel_name",
    "Context": "context",
    "Stream": "stream",
    "Block Size": "block",
    "Grid Size": "grid",
    "Device": "device_id",
    "CC": "cc",
}


# The kernel table's columns beyond IDENTITY_COLUMNS that cross a layer (importer -> models -> report), with
# their units: name -> (pandas dtype, unit, description). Importers fill what the input holds; a missing
# column means "not known" (an ncu export has no op). `KERNEL_COLUMNS` below is the whole declared table.
TRACE_KERNEL_COLUMNS: dict[str, tuple[str, str, str]] = {
    "kind": ("object", "", "what the row times: kernel, memcpy, memset (GPU activities), graph (one launch "
             "of a whole CUDA graph, Nsight Systems' whole-graph trace) or cpu_op (an op call of a CPU "
             "profile)"),
    "op_id": ("Int64", "", "the innermost op that launched the activity: an op_id of the file's ops table "
              "(FileFacts.ops); <NA> when no op is linked. A cpu_op row is the op itself"),
    "op_link": ("object", "",
                "how op_id was found: external id, enclosing op, kernel external id, none, self"),
    "op": ("object", "", "name of the op op_id names (e.g. aten::mm)"),
    "input_shapes": ("object", "", "that op's recorded input shapes as text ('' when none)"),
    "module": ("object", "", "nn.Module qualified name of that op, when known"),
    "duration_source": ("object", "", "what gave the row's duration when not a kernel's own (cpu_op rows)"),
    "duration_missing": ("object", "", "why the row has no duration although the input has the row, e.g. a "
                         "trace of kernel launches that did not record the GPU kernels ('' otherwise): the "
                         "report's `missing` says it"),
    "start_us": ("float64", "µs",
                 "when the GPU activity started, on the trace's clock (NaN when not recorded)"),
    "launches": ("Int64", "count", "launches merged into this row (--aggregate; the Invocations of an ncu "
                 "per-kernel summary; 1 otherwise)"),
    "value_basis": ("object", "", "what the row's metric values are when not one launch's own, e.g. 'average "
                    "over 3 invocations (ncu --print-summary per-kernel)'; the provenance of every quantity "
                    "made from them says it ('' for one launch)"),
    # The hook for costs the trace itself states (e.g. Inductor's per-kernel kernel_flop / kernel_num_gb):
    # when not NaN they cost the kernel instead of the op's formula, with provenance trace_cost_source.
    "trace_flops": ("float64", "FLOP", "FLOPs the trace states for this kernel (NaN when it states none)"),
    "trace_bytes": ("float64", "byte",
                    "DRAM bytes the trace states for this kernel (NaN when it states none)"),
    "trace_cost_source": ("object", "",
                          "where trace_flops/trace_bytes come from, e.g. 'inductor:kernel_flop'"),
}

# The ops table of a trace (FileFacts.ops): one row per op call (cat cpu_op), whether or not it launched a
# kernel. Kernel rows name their innermost launching op by (source, op_id); parents make the tree. The costing
# (which formula prices which kernel) is nsroof.costs.attribution's, never the importer's.
OP_COLUMNS: dict[str, tuple[str, str, str]] = {
    "source": ("object", "", "input file name"),
    "op_id": ("Int64", "", "op call ID, unique within a source (the kernel table's op_id)"),
    "parent_op_id": ("Int64", "", "the innermost op on the same thread enclosing this one (<NA> at the top)"),
    "name": ("object", "", "op name as recorded, e.g. aten::linear"),
    "input_shapes": ("object", "", "recorded Input Dims: a list with one shape (list of int) or shape list "
                     "per argument; None when not recorded"),
    "input_dtypes": ("object", "", "recorded Input type: a list of dtype strings; None when not recorded"),
    "concrete_inputs": ("object", "", "recorded Concrete Inputs as Python values (None for a tensor "
                        "argument); None when not recorded"),
    "sequence_number": ("Int64", "", "autograd sequence number, when recorded"),
    "forward_op_id": ("Int64", "", "for a backward op: the forward op it differentiates (<NA> otherwise)"),
    "thread": ("object", "", "'pid/tid' of the thread that ran it"),
    "start_us": ("float64", "µs", "start timestamp as the trace records it"),
    "duration_us": ("float64", "µs", "wall duration, its children included"),
    "nvtx_path": ("object", "", "enclosing annotation ranges, outermost first, joined with '/'"),
    "module": ("object", "", "nn.Module qualified name, when known"),
    "recorded_in": ("object", "", "the trace file that recorded the op: the source itself, or the capture "
                    "trace (nsroof analyze --capture) whose graph the source's kernels replayed"),
}


# The op-level view's kernel-like table (nsroof.costs.attribution): one row per op call that costs or launched
# kernels, kind 'op', kernel_id = op_id, launches = its kernels, gpu__time_duration.sum = their summed time (a
# CPU trace: the op's own time). It goes through the same quantities and classification as kernel rows.
OP_LEVEL_KERNEL_COLUMNS: tuple[str, ...] = (
    "source", "kernel_id", "kind", "kernel_name", "function", "op", "op_id", "input_shapes", "module",
    "nvtx_path", "device", "cc", "launches", "gpu__time_duration.sum", "duration_source", "duration_missing",
)

# The analytic table: nsroof.costs.attribution.attribute(...) -> one row per kernel-table row, keyed by
# kernel_key (source, kernel_id), never by row order: which op's formula prices the row and what it says.
ANALYTIC_COLUMNS: dict[str, tuple[str, str, str]] = {
    "source": ("object", "", "input file name (with kernel_id: the kernel_key)"),
    "kernel_id": ("Int64", "", "the kernel table's kernel_id"),
    "analytic_op_id": ("Int64", "",
                       "the op whose cost the row belongs to (its op-level row); <NA> when none"),
    "analytic_role": ("object", "", "own (the op's cost on its kernel), work (a share of an op's work over "
                      "its GEMM/conv/attention kernels), aux (a copy/transpose/fill/split-K kernel of an op: "
                      "none of its FLOPs) or '' (not costed)"),
    "analytic_flops": ("float64", "FLOP", "FLOPs the formula gives this row (NaN when none)"),
    "analytic_bytes": ("float64", "byte", "compulsory DRAM bytes the formula gives this row (NaN when none)"),
    "analytic_precision": ("object", "",
                           "report precision of those FLOPs: fp64, fp32, fp16, tensor ('' unknown)"),
    "analytic_tensor_dtype": ("object", "",
                              "for tensor precision: the dtype whose dense tensor peak is the roof"),
    "analytic_formula": ("object", "", "ledger formula name, e.g. gemm ('' when none)"),
    "analytic_label": ("object", "",
                       "the formula with its shape and any share, e.g. gemm(m=8, n=32, k=16, ...)"),
    "analytic_missing": ("object", "", "why the row has no analytic cost ('' when it has one)"),
    "analytic_origin": ("object", "", "what gave the cost: 'analytic' (a ledger formula) or the trace's own "
                        "source prefix (e.g. 'inductor'); the report's provenance is '<origin>:<label>'"),
    "analytic_roof": ("object", "", "where analytic_bytes are moved: 'link' (a collective's bus bytes over "
                      "the GPU's interconnect) or '' (DRAM)"),
}

# Where each recorded step's wall time went (a torch trace's steps: its ProfilerStep#N ranges, else an
# engine's step annotations, else nsroof.step() / optimizer-step marks), HTA's temporal breakdown beside the
# roofline: name -> (unit, description). nsroof.importers.trace.steps fills it; the report's metadata holds
# it per input (facts.step_time) and the summary, HTML and `--by step` show it.
STEP_TIME_COLUMNS: dict[str, tuple[str, str]] = {
    "step": ("", "the step: N of ProfilerStep#N or of the N-th mark, or the engine's step annotation"),
    "start_us": ("µs", "when the step began, on the trace's clock"),
    "wall_s": ("s", "the step's wall time"),
    "op_s": ("s", "time some CPU op ran (the union of the op calls on every thread: nested and parallel "
             "ops counted once)"),
    "outside_ops_s": ("s", "wall_s - op_s: time no op covers (Python, launch overhead, waits)"),
    "outside_ops_share": ("1", "outside_ops_s / wall_s"),
    "waits_s": ("s", "the part of outside_ops_s in gaps of at least 1 ms between ops (a DataLoader, a "
                "synchronize, a sleep: more than 100 kernel launches' host time)"),
    "between_ops_s": ("s",
                      "the rest of outside_ops_s: gaps under 1 ms between ops (launch overhead, Python)"),
    "longest_gap_s": ("s", "the longest stretch of the step no op covers"),
    "dataloader_s": ("s", "time inside `enumerate(DataLoader)#…` ranges (torch's DataLoader iteration)"),
    "kernel_s": ("s", "summed time of the GPU activities the step launched (kernels, copies, sets; "
                 "overlaps counted twice)"),
    "gpu_busy_s": ("s", "time some GPU activity the step launched ran (the union over streams and devices: "
                   "overlaps once)"),
    "gpu_idle_s": ("s", "the GPU's stretch of the step (its start to the end of the last activity it "
                   "launched, at least wall_s) - gpu_busy_s: no kernel, copy or set of the step running"),
}


@dataclass
class FileFacts:
    """What an importer learned about the file as a whole, returned beside the kernel table:
    `kernels, facts = importer.read(path)`."""

    format: str  # e.g. "ncu-csv:details", "ncu-csv:raw", "ncu-rep", "ncu-text:details", "torch-trace"
    source: str  # the input file name
    metric_units: dict[str, str] = field(default_factory=dict)  # metric column -> SI unit after conversion
    warnings: list[str] = field(default_factory=list)  # one-line warnings raised while reading
    # one-line hints (e.g. the ncu command for missing counters)
    hints: list[str] = field(default_factory=list)
    levels: tuple[str, ...] = ("dram", "l2", "l1")  # memory levels the format can speak for
    layout: str = ""  # the CSV/text layout recognised ("new", "old", "body-item", "one-line", ...)
    number_style: str = ""  # CSV/text: the number format decided from the file ("en_US", "C", "de_DE")
    number_style_evidence: str = ""  # the cell that decided number_style
    reader: str = ""  # what read the file (e.g. "ncu_report 2024.1", an `ncu -i` command line)
    extra: dict[str, Any] = field(default_factory=dict)  # format-specific facts (e.g. report_file_version)
    ops: Any = None  # traces: the ops table (OP_COLUMNS, a pandas DataFrame); None for formats without ops


MISSING_COUNTERS = "missing-counters"  # Hint.kind of the `ncu --metrics` list that completes the roofline


class Hint(str):
    """One line of advice, with its structure kept: `source` (the input it is about, '' for a run), `kind`
    ('missing-counters' for the `ncu --metrics` list, '' for other advice), `text` (without the source),
    `metrics` (the metric names of a missing-counters hint) and `kernels` (how many kernels it concerns).
    A str ('source: text'), so it prints, compares and goes into JSON metadata as the line it always was;
    readers take the fields, never parse the line back."""

    source: str
    kind: str
    text: str
    metrics: tuple[str, ...]
    kernels: int

    def __new__(cls, text: str, *, source: str = "", kind: str = "", metrics: tuple[str, ...] = (),
                kernels: int = 0) -> Hint:
        obj = super().__new__(cls, f"{source}: {text}" if source else text)
        obj.source, obj.kind, obj.text, obj.metrics, obj.kernels = source, kind, text, tuple(metrics), kernels
        return obj

    def at(self, source: str) -> Hint:
        """The same hint about the input `source`."""
        return Hint(self.text, source=source, kind=self.kind, metrics=self.metrics, kernels=self.kernels)


@dataclass(frozen=True)
class Field:
    name: str
    type: pa.DataType
    unit: str
    description: str
    categorical: bool = False


_S, _F, _I, _B = pa.string(), pa.float64(), pa.int64(), pa.bool_()

REPORT_FIELDS: tuple[Field, ...] = (
    Field("source", _S, "",
          "input file name (a live profile: the chrome trace it saved, REPORT.trace.json.gz)", True),
    Field("kernel_id", _I, "", "launch ID within the source (first ID of the group when aggregated)"),
    Field("launches", _I, "count", "launches merged into this row (1 unless --aggregate)"),
    Field("kind", _S, "", "what the row times: kernel, memcpy or memset (GPU activities; copies and sets are "
          "never classified), or cpu_op (an op call of a CPU profile)", True),
    Field("kernel_name", _S, "", "kernel name as the profiler printed it", True),
    Field("function", _S, "", "short function name (no return type, templates or parameters)", True),
    Field("op", _S, "", "framework op that launched the kernel (e.g. aten::mm), when known", True),
    Field("input_shapes", _S, "", "the op's input shapes, when known"),
    Field("module", _S, "", "nn.Module qualified name, when known", True),
    Field("device", _S, "", "device name", True),
    Field("device_id", _I, "", "device index, when known (a trace's GPU: overlapping kernels are counted "
          "once per device in the GPU's busy time)"),
    Field("cc", _S, "", "compute capability", True),
    Field("host", _S, "", "host name, when known", True),
    Field("process_id", _I, "", "OS process ID, when known"),
    Field("grid", _S, "", "grid size (x, y, z)", True),
    Field("block", _S, "", "block size (x, y, z)", True),
    Field("stream", _I, "", "CUDA stream ID, when known"),
    Field("nvtx_path", _S, "", "enclosing NVTX ranges, outermost first, joined with '/'", True),
    Field("category", _S, "", "the kind of work: GEMM, attention, convolution, elementwise, normalization, "
          "reduction/softmax, embedding/index, optimizer, loss, communication, memcpy/memset or other; from "
          "the op (its ledger family, nsroof/costs/ledger/aten/), else the kernel name "
          "(nsroof.names.categories)",
          True),
    Field("phase", _S, "", "prefill or decode (mixed: a step holding both) in an LLM generation run: the "
          "engine's step annotation, else the query length of the forward pass's token embedding (1: "
          "decode); '' when the run is no generation (nsroof.costs.phases)", True),
    Field("step", _I, "", "training step the kernel ran in, counted from 1: the step marks of a torch trace "
          "(nsroof.step() or optimizer steps), else the N of the innermost `ProfilerStep#N` / `step N` NVTX "
          "range; null when the input marks no steps"),
    Field("start_us", _F, "µs", "when the kernel started on the GPU, on the trace's clock (torch traces; NaN "
          "for exports that record none, and for launches merged by --aggregate)"),
    Field("duration_s", _F, "s", "kernel duration (sum over merged launches)"),
    Field("duration_source", _S, "", "metric or formula that gave duration_s", True),
    Field("flops", _F, "FLOP", "all floating-point operations: fp64 + fp32 + fp16 + tensor"),
    Field("flops_fp64", _F, "FLOP", "FP64 operations on CUDA cores (FMA = 2)"),
    Field("flops_fp32", _F, "FLOP", "FP32 operations on CUDA cores (FMA = 2)"),
    Field("flops_fp16", _F, "FLOP", "FP16 operations on CUDA cores (HFMA2 = 4, HADD2/HMUL2 = 2)"),
    Field("flops_tensor", _F, "FLOP", "tensor-core operations (dense + sparse)"),
    Field("flops_source", _S, "", "metrics or formula that gave the FLOP counts", True),
    Field("precision", _S, "",
          "precision carrying most FLOPs: fp64, fp32, fp16, tensor ('' when no FLOPs); tensor: the dense "
          "matrix peak of the op's dtype (a GPU's tensor cores; on a CPU pages and charts say matrix)",
          True),
    Field("peak_flop_per_s", _F, "FLOP/s", "compute roof of that precision"),
    Field("level", _S, "", "memory level: dram, l2 or l1; link for a collective costed by its formula (its "
          "bus bytes over the GPU's interconnect, in place of its dram row)", True),
    Field("bytes", _F, "byte", "bytes moved at this level"),
    Field("bytes_source", _S, "",
          "metric or formula that gave bytes (e.g. dram__bytes.sum, analytic:gemm)", True),
    Field("bandwidth_bytes_per_s", _F, "byte/s", "bandwidth roof of this level (link: the interconnect's per "
          "GPU per direction, from the datasheet)"),
    Field("intensity", _F, "FLOP/byte", "arithmetic intensity = flops / bytes"),
    Field("ridge", _F, "FLOP/byte", "ridge point = peak_flop_per_s / bandwidth_bytes_per_s"),
    Field("attainable_flop_per_s", _F, "FLOP/s", "min(peak_flop_per_s, intensity * bandwidth_bytes_per_s)"),
    Field("achieved_flop_per_s", _F, "FLOP/s", "flops / duration_s"),
    Field("achieved_bytes_per_s", _F, "byte/s", "bytes / duration_s"),
    Field("bound", _S, "", "memory (intensity < ridge), compute (intensity >= ridge) or unknown", True),
    Field("time_floor_s", _F, "s", "max(flops / peak_flop_per_s, bytes / bandwidth_bytes_per_s)"),
    Field("roof_fraction", _F, "1", "achieved / attainable: achieved_flop_per_s / attainable_flop_per_s, "
          "or achieved_bytes_per_s / bandwidth when the kernel has no FLOPs"),
    Field("limiting", _S, "", "what sets this kernel's time floor: the level with the largest bytes / "
          "bandwidth, or 'compute' when flops / peak is at least every level's memory time ('' unless every "
          "level and the compute floor are known)", True),
    Field("above_roof", _B, "", "achieved exceeds a roof by more than 5% (a counting or unit error)"),
    Field("above_roof_cause", _S, "", "the likely cause of above_roof at this level: a cache serving a "
          "working set that fits it (DRAM), a roof of another counter (L2, L1), FLOPs counted above what "
          "ran; on a CPU a working set in its L2/L3 or a peak measured low first; '' when not above", True),
    Field("ceiling_source", _S, "",
          "where the roofs came from: ncu:<metrics>, spec:<machine>, measured:<file>, file:<path>", True),
    Field("missing", _S, "",
          "metric names whose absence left a quantity NaN, comma-separated ('' when none)"),
    # The measured-vs-compulsory join (nsroof analyze --ledger); NaN / '' when no formula matched.
    Field("ledger_op", _S, "", "ledger formula matched to this kernel, with its shape", True),
    Field("expected_flops", _F, "FLOP", "FLOPs the ledger formula says the op must do"),
    Field("min_bytes", _F, "byte", "compulsory DRAM bytes from the ledger formula (link row: its bus bytes)"),
    Field("flop_ratio", _F, "1", "flops / expected_flops"),
    Field("excess_traffic", _F, "1", "DRAM bytes / min_bytes"),
    Field("ideal_time_s", _F, "s", "max(expected_flops / peak_flop_per_s, min_bytes / DRAM bandwidth); link "
          "row: / the interconnect bandwidth"),
    Field("headroom", _F, "1", "duration_s / ideal_time_s"),
)

# ---------------------------------------------------------------------------------------------
# The quantities table: nsroof.counters.quantities.derive(kernels) -> one row per kernel (same index),
# the roofline inputs with their provenance, before classification. roofs/classify.py reads it.
# ---------------------------------------------------------------------------------------------


def _quantity_fields() -> tuple[Field, ...]:
    out: list[Field] = [
        Field("duration_s", _F, "s", "kernel duration"),
        Field("duration_source", _S, "", "metric or formula that gave duration_s"),
        *(Field(f"flops_{p}", _F, "FLOP", f"{p} operations") for p in PRECISIONS),
        Field("flops", _F, "FLOP", "sum of the precisions that could be computed"),
        Field("flops_source", _S, "", "formulas that gave the FLOP counts"),
        Field("flops_estimated", _B, "",
              "a FLOP count is an estimate (tensor-pipe instructions x FLOP per instruction)"),
    ]
    for lv in LEVELS:
        out += [Field(f"bytes_{lv}", _F, "byte", f"bytes moved at {lv}"),
                Field(f"bytes_source_{lv}", _S, "", f"metric or formula that gave bytes_{lv}"),
                Field(f"bytes_counter_{lv}", _S, "", f"the counter bytes_{lv} came from (dram, lts__t, "
                      "lts2xbar, l1tex__t, lsu; '' when none): a datasheet roof is that counter's")]
    for p in PRECISIONS:
        out += [Field(f"peak_flop_per_s_{p}", _F, "FLOP/s",
                      f"{p} compute roof from the export ('ncu' ceilings)"),
                Field(f"ceiling_source_{p}", _S, "", f"formula of peak_flop_per_s_{p} ('' when none)")]
    for lv in LEVELS:
        out += [Field(f"bandwidth_bytes_per_s_{lv}", _F, "byte/s", f"{lv} bandwidth roof from the export"),
                Field(f"ceiling_source_{lv}", _S, "",
                      f"formula of bandwidth_bytes_per_s_{lv} ('' when none)")]
    out += [Field(f"missing_{q}", _S, "", f"metric names whose absence left {q} NaN")
            for q in ("duration", "flops", *LEVELS)]
    out += [Field(f"flops_source_{p}", _S, "", f"formula behind flops_{p} ('' when NaN)") for p in PRECISIONS]
    out += [
        Field("flops_partial", _B, "", "flops is a lower bound: some precisions or terms are missing (named "
              "in missing_flops or the source)"),
        Field("tensor_inst", _F, "instruction", "tensor-pipe instructions behind an estimated flops_tensor "
              "(NaN otherwise): the report re-picks the instruction shape against the roof"),
        Field("tensor_cycles_active", _F, "cycle", "tensor-pipe busy cycles summed over SMs, when collected"),
        *(Field(f"clock_hz_{unit}", _F, "Hz", f"{unit} clock the export recorded (NaN when not): datasheet "
                "ceilings are computed at it") for unit in ("sm", "dram", "l2", "l1")),
        Field("flops_tensor_sparse", _F, "FLOP", "tensor FLOPs run with 2:4 sparsity (NaN when not split)"),
        Field("tensor_metric", _S, "",
              "sm__ops_path_tensor_* metric carrying most tensor FLOPs ('' when none)"),
    ]
    return tuple(out)


QUANTITY_FIELDS: tuple[Field, ...] = _quantity_fields()
# What nsroof.costs.attribution.fill adds to the quantities of a table with analytic costs.
ANALYTIC_QUANTITY_FIELDS: tuple[Field, ...] = (
    Field("tensor_dtype", _S, "", "dtype of the tensor roof an analytic cost states ('' when none)"),
    Field("ledger_label", _S, "", "the analytic formula with its shape that gave flops ('' when none)"),
    Field("bytes_link", _F, "byte", "bytes a collective moves over the GPU's links, from its formula "
          "(nccl-tests bus bytes; NaN for other kernels): the report judges them against the interconnect, "
          "level 'link'"),
    Field("bytes_source_link", _S, "", "formula that gave bytes_link ('' when none)"),
)
QUANTITY_COLUMNS: list[str] = [f.name for f in QUANTITY_FIELDS]


FIELD_BY_NAME: dict[str, Field] = {f.name: f for f in REPORT_FIELDS}
COLUMNS: list[str] = [f.name for f in REPORT_FIELDS]

# A dataset's part file (nsroof analyze … -o DIR): a complete report plus the input's rank, which a
# single report cannot know. Every identity value is a typed file column, never a folder-name key.
DATASET_FIELDS: tuple[Field, ...] = (
    *REPORT_FIELDS,
    Field("rank", _I, "",
          "rank of the input's process in its distributed job (null when no evidence names it)"),
)
DATASET_COLUMNS: list[str] = [f.name for f in DATASET_FIELDS]


def arrow_schema(metadata: dict[bytes, bytes] | None = None,
                 fields: tuple[Field, ...] = REPORT_FIELDS) -> pa.Schema:
    fields_ = [
        pa.field(f.name, f.type, nullable=True,
                 metadata={b"unit": f.unit.encode(), b"description": f.description.encode()})
        for f in fields
    ]
    return pa.schema(fields_, metadata=metadata)


def render_markdown() -> str:
    """The report's column table (docs/readme/report.md), generated from REPORT_FIELDS (a test keeps it in
    step)."""
    rows = [(f"`{f.name}`", f"{f.type}" + (" (categorical)" if f.categorical else ""), f.unit or "—",
             f.description)
            for f in REPORT_FIELDS]
    return "\n".join(markdown.table(["column", "type", "unit", "meaning"], rows))


if __name__ == "__main__":
    print(render_markdown())


# A kernel row group of the report (all levels of one launch, or of one aggregated launch group) is
# identified by these columns; `kernel_key` joins them into one string, the only builder of that key.
KERNEL_KEY: tuple[str, ...] = ("source", "kernel_id")


def cpu_ops_only(frame: Any) -> bool:
    """Whether every row of a report DataFrame is an op call of a CPU profile (kind cpu_op): such a report has
    ops, no kernels, and every table, chart and comparison says so."""
    return "kind" in frame.columns and len(frame) > 0 and bool((frame["kind"].astype(str) == "cpu_op").all())


def kernel_key(frame: Any) -> Any:
    """(source, kernel_id) of each row of a report DataFrame as one string Series ('' for a missing value)."""
    source, kernel_id = (frame[c].astype(object).where(frame[c].notna(), "").astype(str) for c in KERNEL_KEY)
    return source + "\x00" + kernel_id
