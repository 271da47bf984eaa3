"""GPU identity (nsroof.roofs.gpu_identity): a trace's GPU from its printed name, else its recorded
properties, else its kernel names; never a guess between entries whose roofs differ."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from nsroof.roofs import gpu_identity as gi
from nsroof.roofs import machines
from nsroof.roofs.gpu_identity import DeviceFacts

GIB = 2**30
INFERRED_MI300X = "MI300X [inferred from the device's properties: GFXIP 9.4, 304 CUs, 192.0 GiB]"


def _entry(name: str) -> machines.Machine:
    return machines.load(name)


# ------------------------------------------------------------ per-entry facts: peak = CUs x clock x per-CU


@pytest.mark.parametrize(
    ("name", "dtype", "per_cu_per_clock", "datasheet"),
    [
        # ROCm MI300 microarchitecture table: matrix FP16 2048 FLOP/clock/CU; 304 CUs x 2100 MHz x 2048
        # = 1307.4 TFLOP/s, the datasheet's
        ("MI300X", "bf16", 2048, 1307.4e12),
        # MI300A: 228 CUs x 2100 MHz x 2048 = 980.6 TFLOP/s
        ("MI300A", "fp16", 2048, 980.6e12),
        # MI250, one GCD: 104 CUs x 1700 MHz x 1024 = 181.0 TFLOP/s = the package's 362.1 / 2
        ("MI250", "fp16", 1024, 362.1e12 / 2),
        # MI250X, one GCD: 110 CUs x 1700 MHz x 1024 = 191.5 = 383 / 2
        ("MI250X", "bf16", 1024, 383e12 / 2),
        # MI210: 104 CUs x 1700 MHz x 256 (matrix FP64) = 45.3 TFLOP/s
        ("MI210", "fp64", 256, 45.3e12),
        # MI100: 120 CUs x 1502 MHz x 512 (matrix BF16) = 92.3 TFLOP/s
        ("MI100", "bf16", 512, 92.3e12),
        # MI355X: 256 CUs x 2400 MHz x 4096 = 2516.6 TFLOP/s (the datasheet rounds it to 2.5 PF)
        ("MI355X", "bf16", 4096, 2516.6e12),
        # MI350X: 256 CUs x 2200 MHz x 8192 (FP8) = 4613.7 TFLOP/s (4.6 PF)
        ("MI350X", "fp8", 8192, 4613.7e12),
        # RX 7900 XTX: 96 CUs x 2500 MHz x 512 (WMMA FP16) = 122.9 TFLOP/s (datasheet 122.8)
        ("RX 7900 XTX", "fp16", 512, 122.8e12),
    ],
)
def test_peak_is_cus_times_clock_times_per_cu_rate(name: str, dtype: str, per_cu_per_clock: int,
                                                    datasheet: float) -> None:
    m = _entry(name)
    derived = m.sm_count * m.clocks_hz["boost"] * per_cu_per_clock
    assert m.peak_flop_per_s[dtype] == pytest.approx(derived, rel=1e-3)
    assert m.peak_flop_per_s[dtype] == pytest.approx(datasheet, rel=1e-3)
    assert m.flop_per_cycle_per_sm("peak_flop_per_s", dtype) == pytest.approx(per_cu_per_clock, rel=1e-3)


def test_mi250_is_one_gcd_with_fewer_cus_than_mi250x() -> None:
    mi250, mi250x = _entry("MI250"), _entry("MI250X")
    # per GCD, as ROCm lists the devices: 208 / 2 and 220 / 2 CUs, 128 / 2 GiB, 3.2768 / 2 TB/s each
    assert (mi250.sm_count, mi250x.sm_count) == (104, 110)
    assert mi250.memory_bytes == mi250x.memory_bytes == 64 * GIB
    assert mi250.bandwidth_bytes_per_s["dram"] == mi250x.bandwidth_bytes_per_s["dram"] == 1.6384e12
    assert any("per GCD" in n for n in mi250.notes) and any("per GCD" in n for n in mi250x.notes)
    # the names ROCm prints: one for each, and one for both that the CU count decides
    assert machines.lookup_device("AMD Instinct MI250X").name == "MI250X"  # type: ignore[union-attr]
    assert machines.lookup_device("AMD Instinct MI250").name == "MI250"  # type: ignore[union-attr]
    both = "AMD Instinct MI250X / MI250"
    assert machines.lookup_device(both) is None
    assert {m.name for m in machines.device_candidates(both)} == {"MI250", "MI250X"}


@pytest.mark.parametrize(("target", "gfxip"), [("gfx942", "9.4"), ("gfx90a", "9.0"), ("gfx908", "9.0"),
                                                ("gfx950", "9.5"), ("gfx1100", "11.0"), ("gfx1201", "12.0")])
def test_gfx_target_to_the_version_hip_reports(target: str, gfxip: str) -> None:
    assert gi.gfxip(target) == gfxip


# ------------------------------------------------------------------ identity from device properties


def test_unnamed_rocm_device_is_identified_from_gfxip_cus_and_memory() -> None:
    # the shared vLLM decode trace's deviceProperties: name '', computeMajor 9, computeMinor 4, numSms 304,
    # totalGlobalMem 192 GiB: gfx942 leaves MI300A (228 CUs), MI300X and MI325X (304); 192 GiB is not a
    # 256 GiB MI325X
    facts = DeviceFacts(name="", cc="9.4", sm_count=304, memory_bytes=192 * GIB, warp_size=64,
                        platform="rocm")
    ident = gi.identify(facts)
    assert ident.machine is not None and ident.machine.name == "MI300X"
    assert ident.device.startswith("MI300X [inferred from") and "304 CUs" in ident.device
    assert machines.lookup_device(ident.device) is ident.machine


def test_mi250_printed_as_radeon_graphics_resolves_from_gfxip_and_cus() -> None:
    # an MI250 GCD under a ROCm that prints 'AMD Radeon Graphics': gfx90a (9.0), 104 CUs, 64 GiB. MI100
    # (120 CUs) and MI250X (110) are out; MI210 and an MI250 GCD remain, with the same roofs: one answer,
    # and the device says both
    facts = DeviceFacts(name="AMD Radeon Graphics", cc="9.0", sm_count=104, memory_bytes=64 * GIB,
                        warp_size=64, platform="rocm")
    assert machines.lookup_device(facts.name) is None
    ident = gi.identify(facts)
    assert ident.machine is not None and ident.machine.name in {"MI210", "MI250"}
    assert "MI210 or MI250" in ident.how and "same roofs" in ident.how
    assert ident.machine.peak_flop_per_s["fp16"] == pytest.approx(_entry("MI250").peak_flop_per_s["fp16"],
                                                                  rel=1e-2)
    # 110 CUs: an MI250X GCD
    x = gi.identify(DeviceFacts(name="AMD Instinct MI250X / MI250", cc="9.0", sm_count=110, platform="rocm"))
    assert x.machine is not None and x.machine.name == "MI250X"


def test_a_name_contradicted_by_its_recorded_cus_gets_no_roofs() -> None:
    # an MI300X in CPX mode: each partition is a device of 38 CUs under the same name; the 304-CU entry's
    # roofs would be 8x too high
    facts = DeviceFacts(name="AMD Instinct MI300X", cc="9.4", sm_count=38, platform="rocm")
    ident = gi.identify(facts)
    assert ident.machine is None and "38 CUs" in ident.why_not
    assert machines.lookup_device(ident.device) is None
    assert "machine table" in machines.unknown_device(ident.device)


def test_generic_name_and_sm_count_pick_one_board_only_when_the_memory_agrees() -> None:
    # 'NVIDIA H100' fits SXM (132 SMs, 80 GB), PCIe (114) and NVL (132, 94 GB)
    sxm = gi.identify(DeviceFacts(name="NVIDIA H100", cc="9.0", sm_count=132, memory_bytes=79.6 * GIB))
    assert sxm.machine is not None and sxm.machine.name == "H100 SXM"
    # the shared kineto trace's 'NVIDIA H100': 132 SMs and 95.1 GiB, more than either board holds
    odd = gi.identify(DeviceFacts(name="NVIDIA H100", cc="9.0", sm_count=132, memory_bytes=102085492736))
    assert odd.machine is None and odd.device == "NVIDIA H100"
    assert "none of the machine table entries" in odd.why_not


# ------------------------------------------------------------------ identity from kernel names


@pytest.mark.parametrize(
    ("names", "label", "machine"),
    [
        (["_ZN7ck_tile6kentryILi1E_gfx942_kernel", "Cijk_Alik_Bljk_BBS_BH_MT64x32x256"], "AMD gfx942", None),
        (["void mha_fwd_kernel_gfx908(float*)"], "", "MI100"),  # one gfx908 entry: that one
        (["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas", "ampere_sgemm_128x64_nn"],
         "NVIDIA Hopper (sm_90)", None),
        (["nvjet_tst_64x64", "sm100_xmma_gemm_f16f16_f16f32"], "NVIDIA Blackwell (sm_100)", None),
        (["_ZN5aiter24add_rmsnorm_quant_kernelIDF16b", "elementwise_kernel"], "AMD Instinct (CDNA 3 or 4)",
         None),
        (["Cijk_Alik_Bljk_HHS_BH_MT128x128x32"], "AMD GPU", None),
        (["volta_sgemm_128x64_nt", "void at::native::vectorized_elementwise_kernel<4>"],
         "NVIDIA GPU of CC >= 7.0", None),
        (["void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>(Params)"],
         "NVIDIA GPU of CC >= 8.0", None),
    ],
)
def test_kernel_names_imply_an_architecture(names: list[str], label: str, machine: str | None) -> None:
    ident = gi.from_kernel_names(names)
    if machine:
        assert ident.machine is not None and ident.machine.name == machine
        assert ident.device.startswith(f"{machine} [inferred from kernel names:")
        return
    assert ident.machine is None
    assert machines.split_inferred(ident.device)[0] == label
    assert "kernel names:" in ident.how and "machine table" in ident.why_not
    # the roofs stay NaN: the report's device resolves to no entry, and says why in the machine-table wording
    assert machines.lookup_device(ident.device) is None
    assert "machine table" in machines.unknown_device(ident.device)


def test_nothing_known_is_no_identity() -> None:
    ident = gi.identify(DeviceFacts(), ["my_kernel", "void foo<int>(int*)"])
    assert ident.machine is None and ident.device == "" and ident.how == ""


# ------------------------------------------------------------------ a trace's kernel table


def _kernels(device: str, names: list[str], kind: str = "kernel") -> pd.DataFrame:
    return pd.DataFrame({"device": [device] * len(names), "kernel_name": names, "kind": [kind] * len(names)})


def test_label_devices_rewrites_an_unnamed_rocm_device_and_says_so() -> None:
    extra = {"gpus": [{"name": "", "cc": "9.4", "sm_count": 304, "memory_bytes": 192 * GIB, "warp_size": 64}],
             "gpu_platform": "rocm"}
    out, notes = gi.label_devices(_kernels("", ["Cijk_Alik_Bljk", "rotary_embedding_kernel"]), extra)
    assert set(out["device"]) == {INFERRED_MI300X}
    assert len(notes) == 1 and "MI300X inferred from" in notes[0] and "--machine NAME overrides" in notes[0]


def test_label_devices_keeps_resolved_names_cpu_rows_and_unknown_printed_names() -> None:
    named = _kernels("NVIDIA A100-SXM4-40GB", ["ampere_sgemm_128x64_nn"])
    assert gi.label_devices(named, {})[0]["device"].tolist() == ["NVIDIA A100-SXM4-40GB"]
    cpu = _kernels("Intel Xeon", ["aten::mm"], kind="cpu_op")
    assert gi.label_devices(cpu, {}) [0]["device"].tolist() == ["Intel Xeon"]
    # a printed name no entry knows stays: kernel names only bound the architecture
    unknown = _kernels("NVIDIA GeForce RTX 9999", ["ampere_sgemm_128x64_nn"])
    out, notes = gi.label_devices(unknown, {})
    assert out["device"].tolist() == ["NVIDIA GeForce RTX 9999"] and "CC >= 8.0" in notes[0]


def test_rocm_trace_gets_no_ncu_metrics_hint() -> None:
    from nsroof.roofs import missing
    from nsroof.schema import Hint

    for device, hinted in (("NVIDIA A100-SXM4-40GB", True), ("AMD Instinct MI300X", False),
                           (INFERRED_MI300X, False), ("AMD GPU [inferred from its ROCm runtime]", False),
                           ("AMD Radeon Graphics", False)):
        report = pd.DataFrame({"source": ["t.json"], "kernel_id": [0], "device": [device], "cc": ["9.4"],
                               "flops": [float("nan")], "bytes": [float("nan")], "duration_s": [1e-5],
                               "bound": ["unknown"],
                               "missing": ["flops (sm__sass_thread_inst_executed_op_ffma_pred_on.sum)"]})
        assert isinstance(missing.completing_metrics_hint(report), Hint) == hinted, device


# ------------------------------------------------------------------ every GPU of the shared exports resolves


def _shared_trace_devices(root: Path) -> dict[str, tuple[list[gi.DeviceFacts], list[str]]]:
    from nsroof.importers.trace.kineto import gpu_facts
    from nsroof.importers.trace.load import load

    out = {}
    for path in sorted((root / "traces").glob("*.json*")):
        events = load(path)
        facts = gi.trace_facts(gpu_facts(events.top))
        out[path.name] = (facts, [a.name for a in events.activities][:5000])
    return out


# Traces whose recorded facts name no single part, with what is honestly said instead (not a guess):
UNRESOLVED = {
    # 'NVIDIA H100', 132 SMs, 95.1 GiB: more memory than the 80 GB SXM or the 94 GB NVL holds
    "kineto__after_fix_trace.json": "NVIDIA H100",
    # no deviceProperties; cutlass_80 / ampere_sgemm kernels run on every GPU from CC 8.0 on
    "hta__timeline_analysis_sampled_rank-0.json.gz": "NVIDIA GPU of CC >= 8.0",
    # no deviceProperties (2020 schema); volta_ cuDNN/cuBLAS kernels run on every GPU from CC 7.0 on
    "kineto__plugin_resnet50_num_workers_0_worker0.pt.trace.json.gz": "NVIDIA GPU of CC >= 7.0",
}


def test_every_gpu_of_the_shared_traces_resolves_or_says_why(shared_fixtures: Path) -> None:
    if not (shared_fixtures / "traces").is_dir():
        pytest.skip("no shared traces")
    found = {}
    for name, (facts, kernel_names) in _shared_trace_devices(shared_fixtures).items():
        one = facts[0] if len(facts) == 1 else gi.DeviceFacts()
        ident = gi.identify(one, kernel_names)
        found[name] = ident
        if name in UNRESOLVED:
            assert ident.machine is None
            assert (machines.split_inferred(ident.device)[0] or ident.device) == UNRESOLVED[name]
        else:
            assert ident.machine is not None, (name, ident)
    assert found["tracelens__vllm_decode_full__graph_execution.json.gz"].machine.name == "MI300X"  # type: ignore[union-attr]
    assert found["tracelens__b200__eager_trace.json.gz"].machine.name == "B200"  # type: ignore[union-attr]


def test_every_gpu_of_the_shared_nsys_exports_resolves(shared_fixtures: Path) -> None:
    exports = sorted((shared_fixtures / "nsys").glob("*.sqlite"))
    if not exports:
        pytest.skip("no shared nsys exports")
    seen = {}
    for path in exports:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            rows = db.execute("SELECT name, smCount, totalMemory, computeMajor, computeMinor "
                              "FROM TARGET_INFO_GPU").fetchall()
        for name, sms, memory, major, minor in rows:
            facts = gi.DeviceFacts(name=name, cc=f"{major}.{minor}", sm_count=sms, memory_bytes=memory,
                                   platform="cuda")
            ident = gi.identify(facts)
            assert ident.machine is not None, (path.name, name)
            assert machines.lookup_device(name) is ident.machine  # the name alone says it too
            seen[name] = ident.machine.name
    assert seen.get("NVIDIA GeForce RTX 2070 SUPER", "RTX 2070 SUPER") == "RTX 2070 SUPER"
    assert seen.get("NVIDIA H200", "H200") == "H200"


def test_mi300x_trace_device_properties_match_the_entry(shared_fixtures: Path) -> None:
    path = shared_fixtures / "traces" / "tracelens__sglang_decode__sglang_Qwen3-8B_decode.json.gz"
    if not path.is_file():
        pytest.skip("no shared SGLang trace")
    with gzip.open(path, "rt") as fh:
        (props,) = json.load(fh)["deviceProperties"]
    m = _entry("MI300X")
    assert props["numSms"] == m.sm_count
    # ROCm reports 16 MiB less than the 192 GiB board: within [MEMORY_FLOOR x entry, entry]
    assert props["totalGlobalMem"] == m.memory_bytes - 16 * 2**20
    assert gi.fits(m, DeviceFacts(sm_count=props["numSms"], memory_bytes=props["totalGlobalMem"]))
    assert gi.gfxip(m.llvm_target) == f"{props['computeMajor']}.{props['computeMinor']}"
