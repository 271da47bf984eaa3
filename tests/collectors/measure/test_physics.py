"""The physics check of a measured CPU profile (nsroof.collectors.measure.physics): cache levels in order,
GEMM peaks under what the CPU's vector units can issue and above a sane floor. Pure arithmetic on
recorded figures; the golden numbers carry their arithmetic.

The figures are the two real runs of docs/readme/measure.md on the 2-core development VM (2,600 MHz in
/proc/cpuinfo, no cpufreq, AVX-512 with AMX-BF16 and AVX512-FP16) and the user's report of issue
"Numbers a user can trust" (l1 2.1 GB/s under dram 21 GB/s).
"""

from __future__ import annotations

from typing import Any

import pytest

from nsroof.collectors.measure import physics
from nsroof.collectors.measure.environment import cpu_flags, cpu_max_mhz, nominal_mhz

GB = 1e9
SPR_FLAGS = ["amx_bf16", "amx_tile", "avx", "avx2", "avx512_bf16", "avx512_fp16", "avx512f", "fma", "sse2"]


def vm(threads: int, **extra: Any) -> dict[str, Any]:
    """The development VM's recorded environment (describe_cpu's fields the check reads)."""
    return {"device": "cpu", "arch": "x86_64", "isa_flags": SPR_FLAGS, "clock_max_mhz": None,
            "clock_nominal_mhz": None, "clock_mhz_at_start": 2600.0, "threads_used": threads,
            "logical_cpus": 2, **extra}


def test_flop_per_cycle_follows_the_flags() -> None:
    spr = physics.isa_flop_per_cycle(SPR_FLAGS, "x86_64")
    assert {d: v for d, (v, _) in spr.items()} == {
        "fp32": 64.0,  # 2 FMA pipes × 16 lanes × 2
        "fp64": 32.0,
        "bf16": 1024.0,  # AMX: 16·16·32 multiply-adds = 16,384 FLOP every 16 cycles
        "fp16": 128.0,  # AVX512_FP16: 32 lanes × 2 × 2 pipes
        "fp8": 1024.0,  # no fp8 instruction: the fastest path
    }
    haswell = physics.isa_flop_per_cycle(["avx", "avx2", "fma", "sse2"], "x86_64")
    assert {d: v for d, (v, _) in haswell.items()} == {"fp32": 32.0, "fp64": 16.0, "bf16": 32.0, "fp16": 32.0,
                                                       "fp8": 32.0}
    assert haswell["bf16"][1].startswith("no bf16 instruction")
    graviton = physics.isa_flop_per_cycle(["asimd", "asimdhp", "bf16", "fphp"], "aarch64")
    assert {d: v for d, (v, _) in graviton.items()} == {"fp32": 32.0, "fp64": 16.0, "bf16": 128.0,
                                                        "fp16": 64.0, "fp8": 128.0}
    assert physics.isa_flop_per_cycle(["asimd", "sme"], "arm64") == {}  # SME's matrix rate: not in the table
    assert physics.isa_flop_per_cycle(["sse2"], "riscv64") == {}
    assert physics.isa_flop_per_cycle([], "x86_64") == {}


def test_the_clock_bound_prefers_cpufreq_else_allows_turbo() -> None:
    assert physics.clock_bound({"clock_max_mhz": 3800.0, "clock_mhz_at_start": 2100.0}) == \
        (3.8e9, "3,800 MHz (cpufreq maximum)")
    # no cpufreq (a VM): the larger of /proc/cpuinfo's and the model name's clock, × 2 for turbo
    hz, how = physics.clock_bound({"clock_mhz_at_start": 2600.0, "clock_nominal_mhz": 2100.0})
    assert hz == pytest.approx(5.2e9) and how == "2,600 MHz × 2 turbo allowance"
    assert physics.clock_bound({}) is None


def test_the_os_facts_are_read_as_recorded(tmp_path: Any) -> None:
    cpuinfo = "processor\t: 0\nflags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512_bf16 amx_bf16 ht\n"
    assert cpu_flags(cpuinfo) == ["amx_bf16", "avx", "avx2", "avx512_bf16", "avx512f", "fma", "sse2"]
    assert cpu_flags("Features\t: fp asimd evtstrm aes bf16 sve\n") == ["asimd", "bf16", "sve"]
    assert nominal_mhz("Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz") == 2100.0
    assert nominal_mhz("Intel(R) Xeon(R) Processor") is None
    freq = tmp_path / "cpuinfo_max_freq"
    freq.write_text("3800000\n")  # kHz
    assert cpu_max_mhz(freq) == 3800.0
    assert cpu_max_mhz(tmp_path / "absent") is None


def test_the_bound_is_cores_times_clock_times_flop_per_cycle() -> None:
    bounds, why = physics.peak_bounds(vm(threads=2))
    assert why == ""
    # 2 cores × 2,600 MHz × 2 (turbo allowance) × 64 FLOP/cycle = 665.6 GFLOP/s
    assert bounds["fp32"][0] == pytest.approx(665.6 * GB)
    assert bounds["fp32"][1] == ("2 core(s) × 2,600 MHz × 2 turbo allowance × 64 FLOP/cycle "
                                 "(AVX-512: 2 FMA pipes × 16 fp32 lanes × 2)")
    # 2 × 5.2 GHz × 1024 = 10,649.6 GFLOP/s (AMX)
    assert bounds["bf16"][0] == pytest.approx(10_649.6 * GB)
    # more threads than CPUs run on the CPUs there are: 8 threads count 2
    assert physics.peak_bounds(vm(threads=8))[0]["fp32"][0] == pytest.approx(665.6 * GB)
    assert physics.peak_bounds(vm(threads=1, arch="riscv64"))[1].startswith("no FLOP-per-cycle table")


def test_the_users_inverted_ladder_is_refused_with_its_numbers() -> None:
    verdict = physics.check_cpu_profile({}, {"l1": 2.1 * GB, "dram": 21 * GB}, vm(threads=2))
    assert not verdict.passed
    # 2.1 < 0.75 × 21 = 15.75
    assert verdict.line() == ("order l1>=dram: l1 2.1 GB/s < 75% of dram 21.0 GB/s: a cache reads slower "
                              "than the memory behind it")


def test_the_busy_run_of_the_docs_fails_and_the_quiet_one_passes() -> None:
    # docs/readme/measure.md, 2 threads at load average 6 on 2 CPUs
    busy = physics.check_cpu_profile(
        {"fp32": 21.5 * GB, "fp16": 11.2 * GB, "bf16": 319.8 * GB},
        {"l1": 5.0 * GB, "l2": 87.7 * GB, "l3": 1.1 * GB, "dram": 5.1 * GB}, vm(threads=2))
    assert [c.name for c in busy.failed] == [
        "order l1>=l2",  # 5.0 < 0.75 × 87.7 = 65.8 (l2 is the fastest level behind l1)
        "order l3>=dram",  # 1.1 < 0.75 × 5.1 = 3.825
        "floor fp16",  # 11.2 < 2 × 5.2 GHz × 128 / 64 = 20.8 GFLOP/s
    ]
    # l2 87.7 ≥ 0.75 × 5.1 (dram, the faster of l3 and dram behind it)
    assert next(c for c in busy.checks if c.name == "order l2>=dram").status == "pass"
    assert "fp16 11.2 GFLOP/s < 1/64 of its bound 1,331.2 GFLOP/s" in busy.line()
    # fp32 21.5 ≥ 665.6 / 64 = 10.4 and bf16 319.8 ≥ 10,649.6 / 64 = 166.4: low, but not below the floor
    assert {c.name for c in busy.checks if c.status == "pass"} >= {"floor fp32", "floor bf16", "ceiling bf16"}
    # the same command with --threads 1 minutes later: every level in order, every peak within its bounds
    quiet = physics.check_cpu_profile(
        {"fp32": 118.5 * GB, "fp16": 146.0 * GB, "bf16": 844.9 * GB},
        {"l1": 139.6 * GB, "l2": 47.3 * GB, "l3": 10.1 * GB, "dram": 7.8 * GB}, vm(threads=1))
    assert quiet.passed, quiet.line()
    assert len(quiet.checks) == 3 + 6  # a check per level with one behind it; a ceiling and a floor per dtype


def test_a_peak_beyond_the_vector_units_is_refused() -> None:
    # 1 core × 5.2 GHz × 64 = 332.8 GFLOP/s at most
    verdict = physics.check_cpu_profile({"fp32": 400 * GB}, {}, vm(threads=1))
    assert [c.name for c in verdict.failed] == ["ceiling fp32"]
    assert verdict.line().startswith("ceiling fp32: fp32 400.0 GFLOP/s > 332.8 GFLOP/s = 1 core(s)")


def test_the_order_tolerance_is_25_percent() -> None:
    at = physics.check_cpu_profile({}, {"l2": 75 * GB, "l3": 100 * GB}, {})
    assert at.passed  # 75 = 0.75 × 100
    below = physics.check_cpu_profile({}, {"l2": 74 * GB, "l3": 100 * GB}, {})
    assert [c.name for c in below.failed] == ["order l2>=l3"]


def test_what_cannot_be_bounded_is_skipped_not_failed() -> None:
    # fp16 on an AVX2 CPU converts to fp32: a ceiling, no floor
    avx2 = vm(threads=1, isa_flags=["avx", "avx2", "fma", "sse2"])
    verdict = physics.check_cpu_profile({"fp16": 0.5 * GB}, {}, avx2)
    assert verdict.passed
    assert {c.name: c.status for c in verdict.checks} == {"ceiling fp16": "pass", "floor fp16": "skip"}
    # no flags recorded (an older profile): only the order is checked
    old = physics.check_cpu_profile({"fp32": 1e15}, {"l1": 100 * GB, "dram": 10 * GB}, {"threads_used": 2})
    assert old.passed
    assert [c.status for c in old.checks] == ["pass", "skip"]
    assert physics.check_cpu_profile({}, {}, {}).to_dict() == {"passed": True, "failed": "", "checks": []}
