"""Datasheet ceilings as ncu computes its own: per-cycle peak × the clock the export recorded; the one
meaning of --machine (machines.resolve); generic device names resolve only where unambiguous."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from nsroof.errors import MachineError
from nsroof.roofs import machines
from nsroof.roofs.machines import Machine

ALL = machines.all_machines()


@pytest.mark.parametrize("m", ALL, ids=[m.name for m in ALL])
def test_every_entry_has_l2_and_l1_roofs_or_says_why_not(m: Machine) -> None:
    for level in ("l2", "l1"):
        assert level in m.bandwidth_bytes_per_s or any(
            n.startswith(f"no {level.upper()}") or f"no L2 or {level.upper()}" in n for n in m.notes), level


# NVIDIA entries (AMD's per-CU rates are tests/roofs/test_gpu_identity.py's: they have no ncu L1 roof)
NVIDIA_SMS = [m for m in ALL if m.sm_count and m.vendor == "NVIDIA"]


@pytest.mark.parametrize("m", NVIDIA_SMS, ids=[m.name for m in NVIDIA_SMS])
def test_per_cycle_figures_times_boost_give_the_datasheet_peaks(m: Machine) -> None:
    # the datasheet peak = per-SM FLOP/cycle × SMs × boost: the per-cycle work is a power of two per SM
    # (FP32 128 or 256, tensor FP16 1024..4096) within the datasheet's own rounding (3%)
    fp32 = m.flop_per_cycle_per_sm("simt_flop_per_s", "fp32")
    assert min(abs(fp32 - p) / p for p in (128, 256)) < 0.03, fp32
    assert m.bandwidth_bytes_per_s["l1"] == pytest.approx(128 * m.sm_count * m.clocks_hz["boost"])


def test_a100_at_765_mhz_is_the_boost_figure_scaled() -> None:
    a = machines.resolve("a100-pcie-40gb")
    assert a is not None
    at = a.at_clocks(sm_hz=765e6)
    # 19.5 TFLOP/s × 765 / 1410 = 10.58 TFLOP/s (= 108 SMs × 128 FLOP/cycle × 765 MHz, ncu's own formula)
    assert at.simt_flop_per_s["fp32"] == pytest.approx(19.5e12 * 765 / 1410)
    assert at.simt_flop_per_s["fp32"] == pytest.approx(108 * 128 * 765e6, rel=0.01)
    # L2 at the SM clock when no L2 clock was recorded: 5120 B × 765 MHz = 3.917 TB/s; L1 128 × 108 × 765e6
    assert at.bandwidth_bytes_per_s["l2"] == pytest.approx(5120 * 765e6)
    assert at.bandwidth_bytes_per_s["l1"] == pytest.approx(128 * 108 * 765e6)
    assert at.bandwidth_bytes_per_s["dram"] == 1555e9  # no DRAM clock recorded: the datasheet figure
    assert at.label == "spec:A100 PCIe 40GB @ 765 MHz SM"
    # the DRAM clock, when recorded, multiplies the bytes/cycle: 1280 × 1.2149 GHz = 1.5551 TB/s
    both = a.at_clocks(sm_hz=765e6, dram_hz=1214.9e6, l2_hz=1063e6)
    assert both.bandwidth_bytes_per_s["dram"] == pytest.approx(1280 * 1214.9e6)
    assert both.bandwidth_bytes_per_s["l2"] == pytest.approx(5120 * 1063e6)
    assert both.label == "spec:A100 PCIe 40GB @ 765 MHz SM, 1215 MHz DRAM, 1063 MHz L2"


def test_no_clock_recorded_leaves_the_boost_figures() -> None:
    a = machines.resolve("a100-40gb")
    assert a is not None and a.at_clocks() is a and a.label == "spec:A100 SXM4 40GB"


def test_hopper_tensor_figures_scale_from_their_own_clock() -> None:
    # H100's 989.4 TFLOP/s BF16 assume 1.83 GHz (132 × 4096 × 1.83e9); FP32's 66.9 assume 1.98 GHz
    h = machines.resolve("h100-sxm")
    assert h is not None
    at = h.at_clocks(sm_hz=1.5e9)
    assert at.peak_flop_per_s["bf16"] == pytest.approx(132 * 4096 * 1.5e9, rel=0.002)
    assert at.simt_flop_per_s["fp32"] == pytest.approx(132 * 256 * 1.5e9, rel=0.002)


def test_measured_profiles_are_not_rescaled() -> None:
    m = Machine(name="cpu", source="measured", simt_flop_per_s={"fp32": 1e11},
                bandwidth_bytes_per_s={"dram": 1e10}, environment={"device": "cpu"})
    assert m.at_clocks(sm_hz=1e9) is m and m.kind == "cpu"


# ---------------------------------------------------------------- --machine, one meaning


@pytest.mark.parametrize(("spec", "expected"), [
    ("NVIDIA A10G", "A10G"),  # the refused case: now the device name as ncu prints it
    ("a10g", "A10G"),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB"),
    ("Tesla V100-DGXS-32GB", "V100 SXM2"),
    ("NVIDIA H100 NVL", "H100 NVL"),
])
def test_resolve_accepts_names_and_device_names(spec: str, expected: str) -> None:
    m = machines.resolve(spec)
    assert m is not None and m.name == expected


def test_resolve_refuses_a_generic_name_naming_the_candidates() -> None:
    with pytest.raises(MachineError, match=r"fits several entries \(H100 SXM, H100 PCIe, H100 NVL\)"):
        machines.resolve("NVIDIA H100")
    assert [m.name for m in machines.device_candidates("NVIDIA H100")] == [
        "H100 SXM", "H100 PCIe", "H100 NVL"]
    assert machines.lookup_device("NVIDIA H100") is None


def test_resolve_none_and_machine_pass_through(tmp_path: Path) -> None:
    assert machines.resolve(None) is None
    m = machines.resolve("l4")
    assert machines.resolve(m) is m


def test_a_cpu_profile_for_a_gpu_export_is_refused() -> None:
    cpu = Machine(name="my cpu", source="measured", simt_flop_per_s={"fp32": 1e11},
                  bandwidth_bytes_per_s={"dram": 1e10, "l3": 5e10}, environment={"device": "cpu"})
    with pytest.raises(MachineError, match="CPU profile, but the export holds GPU kernels"):
        machines.check_against_export(cpu, ["NVIDIA A10G"], gpu_export=True)


def test_a_machine_of_another_device_is_a_warning() -> None:
    l4 = machines.resolve("l4")
    assert l4 is not None
    (warning,) = machines.check_against_export(l4, ["NVIDIA A10G"], gpu_export=True)
    assert "not the export's device 'NVIDIA A10G' (A10G)" in warning
    assert machines.check_against_export(l4, ["NVIDIA L4"], gpu_export=True) == []


def test_clock_tables_refuse_unknown_keys(tmp_path: Path) -> None:
    with pytest.raises(MachineError, match="unknown key 'turbo' in 'clocks_hz'"):
        Machine.from_dict({"name": "x", "peak_flop_per_s": {"fp32": 1e12},
                           "bandwidth_bytes_per_s": {"dram": 1e11}, "clocks_hz": {"turbo": 2e9}})
    assert math.isnan(machines.resolve("b200").flop_per_cycle_per_sm(  # type: ignore[union-attr]
        "peak_flop_per_s", "bf16"))
