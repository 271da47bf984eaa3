"""The environment a measurement belongs to: device, caches, clocks, versions, threads.

Cache sizes come from the OS (sysfs, then `lscpu`) or from the CUDA device properties; a size the
system does not report stays absent, and the ladder then names plateaus from the data alone.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")

_SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024**2, "MB": 1024**2,
               "MIB": 1024**2, "G": 1024**3, "GB": 1024**3, "GIB": 1024**3}


@dataclass(frozen=True)
class CacheLevel:
    name: str  # "l1", "l2", "l3" on a CPU; "l1", "l2" on a GPU
    bytes: int  # capacity one reader sees (per core on a CPU, per SM for a GPU's L1)
    source: str


def parse_size(text: str) -> int | None:
    """'48K' / '2048K' / '300M' (sysfs) or '96 KiB' (lscpu) -> bytes; None if unreadable."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", text or "")
    if not m:
        return None
    factor = _SIZE_UNITS.get(m.group(2).upper())
    if factor is None:
        return None
    return int(float(m.group(1)) * factor)


def cpu_caches_from_sysfs(root: Path = SYSFS_CACHE) -> list[CacheLevel]:
    """Data/unified caches of cpu0, one per level, from /sys/devices/system/cpu/cpu0/cache/index*/."""
    levels: dict[int, CacheLevel] = {}
    if not root.is_dir():
        return []
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text().strip())
            size = parse_size((index / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or size is None:
            continue
        levels[level] = CacheLevel(f"l{level}", size, f"sysfs:{index}/size")
    return [levels[k] for k in sorted(levels)]


def cpu_caches_from_lscpu(text: str) -> list[CacheLevel]:
    """`lscpu` lines such as 'L2 cache: 4 MiB (2 instances)' -> per-instance sizes."""
    levels: dict[int, CacheLevel] = {}
    for line in text.splitlines():
        m = re.match(r"\s*L(\d)(d|i)?\s+cache:\s*([0-9.]+\s*[A-Za-z]*)\s*(?:\((\d+)\s+instances?\))?", line)
        if not m or m.group(2) == "i":
            continue
        size = parse_size(m.group(3))
        if size is None:
            continue
        instances = int(m.group(4) or 1)
        levels[int(m.group(1))] = CacheLevel(f"l{m.group(1)}", size // max(instances, 1), "lscpu")
    return [levels[k] for k in sorted(levels)]


def cpu_caches() -> list[CacheLevel]:
    found = cpu_caches_from_sysfs()
    if found:
        return found
    if shutil.which("lscpu"):
        try:
            out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10, check=False).stdout
        except (OSError, subprocess.SubprocessError):
            return []
        return cpu_caches_from_lscpu(out)
    return []


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_mhz() -> float | None:
    """The current clock of cpu0 as /proc/cpuinfo reports it (a VM may report its host's nominal)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("cpu mhz"):
                return float(line.split(":", 1)[1])
    except (OSError, ValueError):
        pass
    return None


# The /proc/cpuinfo flags that set a core's FLOP per cycle (collectors.measure.physics reads them): x86's
# "flags" line and aarch64's "Features" line. Only these are recorded in a profile.
ISA_FLAGS: frozenset[str] = frozenset({
    "sse2", "avx", "fma", "avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_fp16",
    "asimd", "asimdhp", "fphp", "sve", "sve2", "bf16", "i8mm", "sme",
})
CPUFREQ_MAX = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")


def cpu_flags(cpuinfo: str | None = None) -> list[str]:
    """The ISA_FLAGS cpu0 reports in /proc/cpuinfo (sorted; [] when unreadable)."""
    try:
        text = cpuinfo if cpuinfo is not None else Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            return sorted(set(value.split()) & ISA_FLAGS)
    return []


def cpu_max_mhz(path: Path = CPUFREQ_MAX) -> float | None:
    """cpu0's highest clock (turbo included) from cpufreq, in MHz; None where the kernel has no cpufreq
    (most VMs)."""
    try:
        return int(path.read_text().strip()) / 1000.0  # the file holds kHz
    except (OSError, ValueError):
        return None


def nominal_mhz(model: str) -> float | None:
    """The clock an x86 model name states ('Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz' -> 2100.0)."""
    m = re.search(r"@\s*([0-9.]+)\s*GHz", model)
    return float(m.group(1)) * 1000.0 if m else None


def describe_cpu() -> dict[str, Any]:
    import torch

    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
        memory = int(psutil.virtual_memory().total)
    except ImportError:  # psutil is a dev dependency; the rest still describes the machine
        physical, memory = None, None
    return {
        "device": "cpu",
        "device_name": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "physical_cores": physical,
        "threads_used": torch.get_num_threads(),
        "clock_mhz_at_start": cpu_mhz(),
        "clock_max_mhz": cpu_max_mhz(),
        "clock_nominal_mhz": nominal_mhz(cpu_model()),
        "arch": platform.machine(),
        "isa_flags": cpu_flags(),
        "memory_bytes": memory,
        "caches": {c.name: {"bytes": c.bytes, "source": c.source} for c in cpu_caches()},
        "load_average_at_start": load_average(),
        **_versions(),
    }


def load_average() -> list[float] | None:
    """1/5/15-minute load averages: on a shared machine they say how much of the CPU others took."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def gpu_caches(props: Any) -> list[CacheLevel]:
    """L1/shared per SM and the L2, from torch's device properties (absent fields stay absent)."""
    levels: list[CacheLevel] = []
    l1 = getattr(props, "shared_memory_per_multiprocessor", None)
    if l1:
        levels.append(CacheLevel("l1", int(l1),
                                 "torch.cuda.get_device_properties().shared_memory_per_multiprocessor"))
    l2 = getattr(props, "L2_cache_size", None)
    if l2:
        levels.append(CacheLevel("l2", int(l2), "torch.cuda.get_device_properties().L2_cache_size"))
    return levels


def smi_id(uuid: Any) -> str | None:
    """nvidia-smi's --id for a device torch knows by UUID: 'GPU-<uuid>'. torch's index counts only the
    devices CUDA_VISIBLE_DEVICES leaves visible, nvidia-smi's counts all of them, so an index can name
    another card; the UUID cannot. None when torch gives no UUID."""
    text = str(uuid or "").strip()
    if not text:
        return None
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


def nvidia_smi_query(device: str | None) -> dict[str, str]:
    """Driver, clocks and power limit as nvidia-smi reads them now for the device with this id (smi_id);
    {} when nvidia-smi is absent or the device has no UUID (asking by index could read another card)."""
    fields = ["driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "power.limit",
              "pstate", "temperature.gpu"]
    if device is None or not shutil.which("nvidia-smi"):
        return {}
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--id={device}", f"--query-gpu={','.join(fields)}",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=15, check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [v.strip() for v in out.splitlines()[0].split(",")] if out else []
    return dict(zip(fields, values, strict=True)) if len(values) == len(fields) else {}


def describe_cuda(index: int | None = None) -> dict[str, Any]:
    import torch

    idx = torch.cuda.current_device() if index is None else index
    props = torch.cuda.get_device_properties(idx)
    uuid = smi_id(getattr(props, "uuid", None))
    smi = nvidia_smi_query(uuid)
    return {
        "device": "cuda",
        "device_index": idx,
        "device_uuid": uuid,
        "device_name": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "memory_bytes": int(props.total_memory),
        "caches": {c.name: {"bytes": c.bytes, "source": c.source} for c in gpu_caches(props)},
        "driver_version": smi.get("driver_version"),
        "clocks_mhz_at_start": {k: smi.get(k)
                                for k in ("clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem")},
        "power_limit_w": smi.get("power.limit"),
        "pstate": smi.get("pstate"),
        "cuda_runtime": torch.version.cuda,
        "cpu_model": cpu_model(),
        **_versions(),
    }


def _versions() -> dict[str, Any]:
    import torch

    from nsroof._version import __version__

    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "nsroof": __version__,
        "platform": platform.platform(),
        "measured_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def cache_levels(environment: dict[str, Any]) -> list[CacheLevel]:
    return [CacheLevel(name, int(v["bytes"]), str(v.get("source", "")))
            for name, v in environment.get("caches", {}).items()]
