"""Which kernels of a report a command shows: `--kernel`, `--nvtx`, `--step`, `--device`, `--source`
(declared once, nsroof.commands.options.selection_options; the Python API takes the same Selection).

Every filter keeps whole kernels (all the levels of a launch), so a selected report is still a report:
shares, bounds and charts are computed over what was kept. Patterns are Python regular expressions,
searched case-insensitively (`--kernel gemm` keeps `ampere_bf16_s16816gemm_…`); a bad pattern or step
list is a one-line NsroofError, and a selection that keeps nothing says how many kernels it looked at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nsroof.errors import NsroofError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pandas as pd


@dataclass(frozen=True)
class Selection:
    kernel: str | None = None  # regex on the function name or the full kernel name
    nvtx: str | None = None  # regex on the NVTX path
    step: str | None = None  # step numbers: 3, 2-4 or 1,3,5 (the report's `step` column)
    device: str | None = None  # regex on the device name
    source: str | None = None  # regex on the input file name

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.kernel, self.nvtx, self.step, self.device, self.source))

    def describe(self) -> str:
        """The options as typed: '--kernel gemm --step 2'."""
        return " ".join(f"--{name} {value}" for name, value in self._given())

    def _given(self) -> list[tuple[str, str]]:
        return [(n, str(v)) for n, v in (("kernel", self.kernel), ("nvtx", self.nvtx), ("step", self.step),
                                           ("device", self.device), ("source", self.source)) if v is not None]

    def mask(self, frame: pd.DataFrame) -> np.ndarray:
        """Rows of `frame` (a report) that the selection keeps."""
        import numpy as np
        import pandas as pd

        keep = np.ones(len(frame), dtype=bool)
        if self.kernel is not None:
            pattern = _compile("--kernel", self.kernel)
            keep &= _search(frame, "function", pattern) | _search(frame, "kernel_name", pattern)
        for option, column, value in (("--nvtx", "nvtx_path", self.nvtx), ("--device", "device", self.device),
                                      ("--source", "source", self.source)):
            if value is not None:
                keep &= _search(frame, column, _compile(option, value))
        if self.step is not None:
            wanted = parse_steps(self.step)
            if "step" not in frame.columns:
                raise NsroofError("--step: this report has no `step` column (written by an older nsroof); "
                                  "analyze the export again")
            steps = pd.to_numeric(frame["step"], errors="coerce")
            keep &= steps.isin(wanted).to_numpy(dtype=bool)
        return keep

    def apply(self, frame: pd.DataFrame, *, what: str = "the report") -> pd.DataFrame:
        """The rows kept; an NsroofError when the selection keeps none of a non-empty report."""
        if not self:
            return frame
        if self.step is not None:
            _check_steps(frame, parse_steps(self.step), what)
        kept = frame[self.mask(frame)]
        if kept.empty and not frame.empty:
            n = _kernel_count(frame)
            hint = ""
            if self.step is not None and "step" in frame.columns and frame["step"].isna().all():
                hint = " (it marks no steps: profile with nsroof.step() or ProfilerStep ranges)"
            raise NsroofError(f"no kernel matches {self.describe()}: {n} kernel{'s' if n != 1 else ''} in "
                              f"{what}{hint}")
        return kept


def parse_steps(text: str) -> list[int]:
    """'3' -> [3]; '2-4' -> [2, 3, 4]; '1,3,5' -> [1, 3, 5]; anything else is an NsroofError."""
    out: list[int] = []
    for part in str(text).split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if m is None or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
            raise NsroofError(f"--step {text!r}: give step numbers as N, N-M or N,M,… (e.g. --step 2 or "
                              "--step 2-4)")
        low = int(m.group(1))
        out += list(range(low, int(m.group(2) or low) + 1))
    return out


def _check_steps(frame: pd.DataFrame, wanted: list[int], what: str) -> None:
    """An NsroofError naming the steps that exist when --step asks for one the report does not hold (a
    report that marks no steps at all is left to apply's own message)."""
    import pandas as pd

    if "step" not in frame.columns:
        return
    held = sorted({int(s) for s in pd.to_numeric(frame["step"], errors="coerce").dropna().unique()})
    missing = [s for s in dict.fromkeys(wanted) if s not in set(held)]
    if held and missing:
        raise NsroofError(f"no step{'s' if len(missing) > 1 else ''} {step_list(missing)}: {what} holds "
                          f"step{'s' if len(held) > 1 else ''} {step_list(held)}")


def step_list(steps: list[int]) -> str:
    """'2, 3, 4'; a longer list folds its runs: '1-40, 42'."""
    if len(steps) <= 8:
        return ", ".join(str(s) for s in steps)
    runs: list[list[int]] = []
    for s in steps:
        if runs and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def _compile(option: str, pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise NsroofError(f"{option} {pattern!r} is not a valid regular expression: {exc}") from None


def _search(frame: pd.DataFrame, column: str, pattern: re.Pattern[str]) -> np.ndarray:
    import numpy as np

    from nsroof.frames.columns import texts
    from nsroof.frames.distinct import map_rows

    if column not in frame.columns:
        return np.zeros(len(frame), dtype=bool)
    return map_rows(lambda v: pattern.search(v) is not None, texts(frame, column)).astype(bool)


def _kernel_count(frame: pd.DataFrame) -> int:
    from nsroof.schema import kernel_key

    return (int(kernel_key(frame).nunique()) if all(c in frame.columns for c in ("source", "kernel_id"))
            else len(frame))


def from_options(**options: Any) -> Selection:
    """A Selection from the five option values (None: not given)."""
    return Selection(**{k: options.get(k) for k in ("kernel", "nvtx", "step", "device", "source")})
