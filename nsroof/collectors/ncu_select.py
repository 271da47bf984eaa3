"""What `nsroof ncu` profiles, and how long that will take: the NVTX range and ncu's own selection options.

Selection (``Selection``): one NVTX range, chosen by mode, plus ncu's options under ncu's own names, placed
in the ncu part of the command (never in the profiled script's arguments):

- ``step`` (the default): the start/end range ``nsroof.step``, opened by the bootstrap at the end of the
  ``warmup``-th step and closed at the end of the next one, so exactly one step after warm-up is profiled.
  A step ends at ``nsroof.step()`` or, in a script that never calls it, at each optimizer step (the same
  boundaries ``nsroof.profile`` counts). A script that marks no step at all is profiled again, its first
  ``FIRST_KERNELS`` kernels (``run`` mode with ``-c``).
- ``range``: the user's ``nsroof.annotate(NAME)`` range (opened process-wide by the bootstrap).
- ``run``: the whole script (``nsroof.run``), bounded by ``-c``.

NCCL kernels are left out unless asked (``--include-nccl``): under kernel replay a collective waits for
peers that are not replayed and hangs. ncu has no exclude-by-name option, so the exclusion is the kernel
filter ``-k regex:^(?!nccl)`` (NCCL's kernels are named ``ncclKernel_*`` / ``ncclDevKernel_*``); a ``-k``
the user gives replaces it.

The NVTX filter names the domain of the backend the profiled process will use (nsroof.collectors
.nvtx_ranges): ``nsroof@NAME`` for the nvtx package's ``nsroof`` domain, plain ``NAME`` (the default
domain, ncu's syntax for a start/end range there) for torch.cuda.nvtx. ``nvtx_backend_of(python)`` asks
the target interpreter which one it has, and the command sets NSROOF_NVTX_BACKEND to match.

Estimate (``estimate``): kernels × replay passes × a cost per pass. Replay passes are not known before ncu
runs (they depend on how the metrics map to counters); ``PASSES_PER_METRIC`` is a rough rule (the roofline
set's ~25 metrics take 10–30 passes), and the cost per pass (``PASS_S``) covers ncu saving and restoring
the kernel's memory between passes. A run's log (``==PROF== ... - N passes``) gives the real figures
(``log_facts``), which the report's metadata keeps.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

from nsroof.errors import NsroofError

MODES: tuple[str, ...] = ("step", "range", "run")
STEP_RANGE = "nsroof.step"
RUN_RANGE = "nsroof.run"
DOMAIN = "nsroof"
NCCL_EXCLUDED = "regex:^(?!nccl)"
FIRST_KERNELS = 200  # what a script without step boundaries gets (run mode, -c)
REPLAY_MODES: tuple[str, ...] = ("kernel", "application", "range", "app-range")
TARGET_PROCESSES: tuple[str, ...] = ("all", "application-only")
CLOCK_CONTROLS: tuple[str, ...] = ("base", "none")
NSROOF_SETS: tuple[str, ...] = ("roofline", "minimal")
PASSES_PER_METRIC = 0.6  # rough: ~25 roofline metrics -> ~15 passes (10–30 seen)
PASS_S = 0.02  # rough cost of one replay pass of a short kernel: save/restore of its memory, counter setup
NCU_DEFAULT_CLOCK = "base"  # ncu's own default (`ncu --help`: --clock-control arg (=base))
_PASSES = re.compile(r"==PROF== Profiling \"(?P<name>.*)\".*- (?P<passes>\d+) pass(?:es)?\s*$")
_PROBE = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('nvtx') else 3)"


@dataclass(frozen=True)
class Selection:
    mode: str = "step"
    range_name: str = STEP_RANGE
    warmup_steps: int = 1
    kernel_name: str | None = None
    launch_count: int | None = None
    launch_skip: int | None = None
    replay_mode: str | None = None
    target_processes: str | None = None
    clock_control: str | None = None
    section_set: str | None = None  # an ncu section set (`--set full`), collected beside nsroof's metrics
    include_nccl: bool = False
    extra: tuple[str, ...] = ()  # --ncu-args, split as a shell would
    nvtx_backend: str = "nvtx"  # nvtx | torch: the domain of the filter

    @property
    def clock(self) -> str:
        return self.clock_control or NCU_DEFAULT_CLOCK

    def nvtx_filter(self) -> str:
        """ncu's start/end range filter for the range in the backend's domain (see the module docstring)."""
        name = check_range_name(self.range_name)
        return f"{DOMAIN}@{name}" if self.nvtx_backend == "nvtx" else name

    def ncu_options(self) -> list[str]:
        """ncu's selection options, in ncu's names, for the ncu part of the command."""
        opts = ["--nvtx", "--nvtx-include", self.nvtx_filter()]
        kernel = (self.kernel_name if self.kernel_name is not None
                  else (None if self.include_nccl else NCCL_EXCLUDED))
        pairs = (("-k", kernel), ("-c", self.launch_count), ("-s", self.launch_skip),
                 ("--replay-mode", self.replay_mode), ("--target-processes", self.target_processes),
                 ("--clock-control", self.clock_control), ("--set", self.section_set))
        for flag, value in pairs:
            if value is not None:
                opts += [flag, str(value)]
        return opts + list(self.extra)

    def facts(self) -> dict[str, object]:
        """What the report's metadata records about the selection."""
        return {"mode": self.mode, "range": self.range_name, "nvtx_filter": self.nvtx_filter(),
                "warmup_steps": self.warmup_steps if self.mode == "step" else None,
                "kernel_name": self.kernel_name or ("" if self.include_nccl else NCCL_EXCLUDED),
                "launch_count": self.launch_count, "launch_skip": self.launch_skip,
                "replay_mode": self.replay_mode or "kernel", "clock_control": self.clock,
                "nvtx_backend": self.nvtx_backend, "ncu_args": list(self.extra)}


def make_selection(*, range_name: str | None = None, whole: bool = False, warmup_steps: int = 1,
                   kernel_name: str | None = None, launch_count: int | None = None,
                   launch_skip: int | None = None,
                   replay_mode: str | None = None, target_processes: str | None = None,
                   clock_control: str | None = None, metric_set: str = "roofline", include_nccl: bool = False,
                   ncu_args: str = "", nvtx_backend: str = "nvtx") -> Selection:
    """A checked Selection from the command's options (a bad value: NsroofError naming the option)."""
    if range_name is not None and whole:
        raise NsroofError("--range and --whole choose different ranges: give one of them")
    mode = "range" if range_name is not None else "run" if whole else "step"
    name = range_name if range_name is not None else RUN_RANGE if whole else STEP_RANGE
    check_range_name(name)
    _check_count("--warmup-steps", warmup_steps, minimum=0)
    _check_count("-c/--launch-count", launch_count, minimum=1)
    _check_count("-s/--launch-skip", launch_skip, minimum=0)
    for flag, value, allowed in (("--replay-mode", replay_mode, REPLAY_MODES),
                                 ("--target-processes", target_processes, TARGET_PROCESSES),
                                 ("--clock-control", clock_control, CLOCK_CONTROLS)):
        if value is not None and value not in allowed:
            raise NsroofError(f"{flag} {value}: ncu accepts {', '.join(allowed)}")
    try:
        extra = tuple(shlex.split(ncu_args))
    except ValueError as exc:
        raise NsroofError(f"--ncu-args {ncu_args!r}: {exc}") from None
    return Selection(mode=mode, range_name=name, warmup_steps=warmup_steps, kernel_name=kernel_name,
                     launch_count=launch_count, launch_skip=launch_skip, replay_mode=replay_mode,
                     target_processes=target_processes, clock_control=clock_control,
                     section_set=None if metric_set in NSROOF_SETS else metric_set, include_nccl=include_nccl,
                     extra=extra, nvtx_backend=nvtx_backend)


def _check_count(flag: str, value: int | None, *, minimum: int) -> None:
    if value is not None and value < minimum:
        raise NsroofError(f"{flag} {value}: needs a whole number >= {minimum}")


def check_range_name(name: str) -> str:
    # ncu's NVTX filter grammar gives '/', '[', ']', '+', '*' and '@' a meaning; '"' breaks its CSV.
    bad = sorted(set(name) & set('/[]+*@"'))
    if not name or bad:
        raise NsroofError(f"range name {name!r} cannot be used in an ncu NVTX filter"
                          + (f" (it contains {' '.join(bad)})" if bad else "")
                          + "; use letters, digits, '.', '_' or '-'")
    return name


def nvtx_backend_of(python: str, env: dict[str, str] | None = None) -> str:
    """'nvtx' when `python` can import the nvtx package, else 'torch' (torch.cuda.nvtx, which every CUDA
    build of torch has; also the answer when `python` cannot be run here, as in a dry run for a cluster)."""
    forced = (env or os.environ).get("NSROOF_NVTX_BACKEND", "").strip().lower()
    if forced in ("nvtx", "torch"):
        return forced
    try:
        proc = subprocess.run([python, "-c", _PROBE], env=env, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return "torch"
    return "nvtx" if proc.returncode == 0 else "torch"


def estimated_passes(n_metrics: int) -> int:
    return max(1, math.ceil(n_metrics * PASSES_PER_METRIC))


def estimate(selection: Selection, n_metrics: int) -> str:
    """One line: kernels × passes × cost per pass -> seconds, every factor named (see the module
    docstring)."""
    passes = estimated_passes(n_metrics)
    if selection.launch_count is not None:
        kernels, what = selection.launch_count, f"at most {selection.launch_count} kernels (-c)"
    elif selection.mode == "step":
        kernels, what = None, "the kernels of one step (not known before it runs)"
    else:
        kernels, what = None, f"every kernel in the range {selection.range_name}"
    per_kernel_s = passes * PASS_S
    head = (f"estimate: {what} × ~{passes} replay passes ({n_metrics} metrics × {PASSES_PER_METRIC} "
            f"passes/metric, a rough rule) × ~{PASS_S * 1e3:.0f} ms per pass = ~{per_kernel_s:.2f} s per "
            "kernel")
    if kernels is None:
        return head + "; bound it with -c N (the run takes about N × that)"
    return head + f" -> ~{kernels * per_kernel_s:,.0f} s of profiling, plus the script's own run time"


def log_facts(log: Path) -> dict[str, object]:
    """Kernels profiled and replay passes per kernel, read from ncu's log (its '==PROF== Profiling' lines)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return {}
    passes = [int(m.group("passes")) for m in map(_PASSES.search, lines) if m is not None]
    if not passes:
        return {"profiled_kernels": 0}
    return {"profiled_kernels": len(passes), "passes_median": statistics.median(passes),
            "passes_max": max(passes)}
