"""Machine ceilings as data: every packaged datasheet entry is valid and sourced, device names from real
exports resolve to exactly one entry, names/aliases/files load, unknown names fail clearly."""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import pytest

from nsroof.errors import InputError, MachineError, NsroofError
from nsroof.roofs import machines
from nsroof.roofs.machines import RATE_TABLES, Machine

ALL = machines.all_machines()
IDS = [m.name for m in ALL]

# The issue's minimum coverage (issue 2 §4, issue 3 §2).
REQUIRED = [
    "V100 SXM2", "A100 SXM4 40GB", "A100 SXM4 80GB", "A100 PCIe 80GB", "A10G", "A30", "L4", "L40S",
    "RTX 2060 SUPER", "RTX 2080 Ti", "RTX 3060", "RTX 3070", "RTX 3080", "RTX 4090", "RTX 5070", "RTX 5090",
    "GTX 1650", "GTX 1660 Ti", "H100 SXM", "H100 PCIe", "GH200", "H200", "B200",
    # issue 19: every NVIDIA datacenter GPU since Volta, common GeForce/laptop parts, AMD Instinct
    "V100 PCIe", "V100S PCIe", "T4", "A2", "A10", "A16", "A40", "A100 PCIe 40GB", "H100 NVL", "H800", "H20",
    "H200 NVL", "L40", "GB200", "B300", "RTX PRO 6000 Blackwell", "RTX 3050 Laptop", "RTX 3060 Laptop",
    "RTX 2060 Max-Q", "GTX 1650 SUPER", "GTX 1660", "GTX 1660 SUPER", "MI250X", "MI300X", "MI325X",
    "MI100", "MI210", "MI250", "MI300A", "MI350X", "MI355X", "RX 7900 XTX", "W7900",
]
DENSE_DTYPES = {"fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "fp64_tensor"}


# ---------------------------------------------------------------- the table itself


def test_required_machines_are_packaged() -> None:
    assert set(REQUIRED) <= set(IDS)


def test_names_and_aliases_are_unique() -> None:
    seen: dict[str, str] = {}
    for m in ALL:
        for key in (m.name, *m.aliases):
            norm = re.sub(r"[\s_\-]+", "-", key.casefold())
            assert norm not in seen or seen[norm] == m.name, (
                f"{key!r} names both {seen.get(norm)} and {m.name}")
            seen[norm] = m.name


@pytest.mark.parametrize("m", ALL, ids=IDS)
def test_every_number_is_positive_and_sourced(m: Machine) -> None:
    assert m.source == "spec"
    assert m.peak_flop_per_s and m.bandwidth_bytes_per_s.get("dram")
    keys = set()
    for table in (*RATE_TABLES, "clocks_hz", "bytes_per_cycle", "cache_bytes", "counter_bytes_per_cycle",
                  "counter_bandwidth_bytes_per_s"):
        for k, v in getattr(m, table).items():
            assert math.isfinite(v) and v > 0, f"{table}.{k}"
            keys.add(f"{table}.{k}")
    if m.sm_count:
        keys.add("sm_count")
    if m.memory_bytes:
        keys.add("memory_bytes")
    # one citation per number, and no citation for a number that is not there
    assert set(m.sources) == keys
    assert all(len(s) > 20 for s in m.sources.values())
    assert set(m.peak_flop_per_s) <= DENSE_DTYPES
    assert set(m.bandwidth_bytes_per_s) <= {"dram", "l2", "l1"}
    # every L2 / L1 figure names the counter it is the roof of
    assert {lv for lv in ("l2", "l1") if lv in m.bandwidth_bytes_per_s} == set(m.counters)


@pytest.mark.parametrize("m", ALL, ids=IDS)
def test_sparse_figures_kept_apart_and_twice_dense(m: Machine) -> None:
    # 2:4 structured sparsity doubles the tensor rate; a dense dict holding a sparse figure would
    # make every dense GEMM look half as efficient (the H100 1979-vs-989 trap).
    for dtype, sparse in m.sparse_peak_flop_per_s.items():
        dense = m.peak_flop_per_s.get(dtype)
        assert dense is not None, f"sparse {dtype} without a dense figure"
        assert sparse == pytest.approx(2 * dense, rel=1e-3), dtype
    # FP64 and FP32 have no 2:4 mode
    assert not {"fp64", "fp32"} & set(m.sparse_peak_flop_per_s)


@pytest.mark.parametrize("m", ALL, ids=IDS)
def test_simt_rates_never_exceed_the_best_matmul_rate(m: Machine) -> None:
    for dtype, simt in m.simt_flop_per_s.items():
        if dtype in m.peak_flop_per_s:
            assert simt <= m.peak_flop_per_s[dtype] * (1 + 1e-9), dtype


def test_h100_is_dense_bf16_989_and_3_35_tb_per_s() -> None:
    h = machines.load("h100-sxm")
    assert h.name == "H100 SXM"
    assert h.peak_flop_per_s["bf16"] == 989.4e12  # dense; 1978.8e12 is the 2:4 sparse figure
    assert h.sparse_peak_flop_per_s["bf16"] == pytest.approx(1978.8e12)
    assert h.bandwidth_bytes_per_s["dram"] == 3.35e12
    # ridge 989.4e12 / 3.35e12 = 295.3 FLOP/byte (shared/docs/roofline-metrics.md §6: "≈ 295")
    assert h.ridge_flop_per_byte("bf16") == pytest.approx(295.34, abs=0.01)


def test_v100_ridges_139_and_40() -> None:
    v = machines.load("V100 SXM2")
    assert v.peak_flop_per_s["fp16"] == 125e12
    # L1 derived from its per-cycle figure: 128 B × 80 SMs × 1.53 GHz = 15.667 TB/s
    assert v.bandwidth_bytes_per_s == {"dram": 900e9, "l2": 3.1e12, "l1": pytest.approx(15.6672e12)}
    # 125e12 / 900e9 = 138.9 -> "139" against DRAM; 125e12 / 3.1e12 = 40.3 -> "40" against L2
    assert round(v.ridge_flop_per_byte("fp16", "dram")) == 139
    assert round(v.ridge_flop_per_byte("fp16", "l2")) == 40
    # the chapter's single-precision ridge: 15.7e12 / 900e9 = 17.4 -> "17"
    assert round(v.ridge_flop_per_byte("fp32", "dram", table="simt_flop_per_s")) == 17
    assert math.isnan(v.ridge_flop_per_byte("bf16"))  # no BF16 on Volta: unknown, never a guess
    assert v.ridge_flop_per_byte("fp16", "l1") == pytest.approx(125e12 / 15.6672e12)  # 7.98


def test_a100_80gb_ridge_153() -> None:
    # 312e12 / 2.039e12 = 153.0 (shared/docs/roofline-metrics.md §6: "A100 80 GB ≈ 153 FLOP/B")
    assert machines.load("a100-80gb").ridge_flop_per_byte("bf16") == pytest.approx(153.02, abs=0.01)


def test_derived_consumer_figures_follow_their_formula() -> None:
    # RTX 3060: 3584 cores x 2 FLOP x 1.777e9 Hz = 12.737e12; tensor fp16 28 SM x 1024 x 1.777e9 = 50.95e12
    m = machines.load("rtx3060")
    assert m.simt_flop_per_s["fp32"] == pytest.approx(12.737e12, rel=1e-4)
    assert m.peak_flop_per_s["fp16"] == pytest.approx(50.95e12, rel=1e-4)
    # RTX 5090: 170 SM x 4096 FP4 op/clk x 2.407e9 Hz = 1676e12 dense, x2 sparse = 3352 "AI TOPS"
    b = machines.load("RTX 5090")
    assert b.sparse_peak_flop_per_s["fp4"] == pytest.approx(3352e12, rel=1e-3)


# ---------------------------------------------------------------- device-name lookup

DEVICE_NAMES = {
    "NVIDIA A100-SXM4-40GB": "A100 SXM4 40GB",
    "NVIDIA A100-SXM4-80GB": "A100 SXM4 80GB",
    "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB",
    "NVIDIA A100-PCIE-40GB": "A100 PCIe 40GB",
    "NVIDIA GeForce RTX 4090": "RTX 4090",
    "GeForce GTX 1650": "GTX 1650",
    "NVIDIA GeForce GTX 1660 Ti": "GTX 1660 Ti",
    "NVIDIA GeForce RTX 2060 SUPER": "RTX 2060 SUPER",
    "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA GH200 480GB": "GH200",
    "NVIDIA H200": "H200",
    "NVIDIA B200": "B200",
    "Tesla V100-SXM2-16GB": "V100 SXM2",
    "Tesla V100-PCIE-32GB": "V100 PCIe",
    "NVIDIA A10G": "A10G",
    "NVIDIA A30": "A30",
    "NVIDIA L4": "L4",
    "NVIDIA L40S": "L40S",
    "NVIDIA GeForce RTX 5070": "RTX 5070",
    "NVIDIA GeForce RTX 5090": "RTX 5090",
    "nvidia geforce rtx 3080": "RTX 3080",
    "NVIDIA H100 NVL": "H100 NVL",  # issue 13 §5: the names nvidia-smi prints for these boards
    "NVIDIA H200 NVL": "H200 NVL",
    "Tesla V100-DGXS-32GB": "V100 SXM2",
    # issue 19: the GPUs people profile on every day, as ncu / nvidia-smi / torch print them
    "Tesla T4": "T4",
    "NVIDIA T4": "T4",
    "Tesla V100S-PCIE-32GB": "V100S PCIe",
    "NVIDIA A2": "A2",
    "NVIDIA A10": "A10",
    "NVIDIA A16": "A16",
    "NVIDIA A40": "A40",
    "NVIDIA L40": "L40",
    "NVIDIA H800": "H800",
    "NVIDIA H20": "H20",
    "NVIDIA GB200": "GB200",
    "NVIDIA B300 SXM6 AC": "B300",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "RTX PRO 6000 Blackwell",
    "NVIDIA RTX 6000 Ada Generation": "RTX 6000 Ada",
    "NVIDIA GeForce RTX 3060 Ti": "RTX 3060 Ti",
    "NVIDIA GeForce RTX 3060 Laptop GPU": "RTX 3060 Laptop",
    "NVIDIA GeForce RTX 3050 Laptop GPU": "RTX 3050 Laptop",
    "NVIDIA GeForce RTX 3070 Laptop GPU": "RTX 3070 Laptop",
    "NVIDIA GeForce RTX 3080 Laptop GPU": "RTX 3080 Laptop",
    "NVIDIA GeForce RTX 4090 Laptop GPU": "RTX 4090 Laptop",
    "NVIDIA GeForce RTX 4060 Laptop GPU": "RTX 4060 Laptop",
    "NVIDIA GeForce RTX 2060 with Max-Q Design": "RTX 2060 Max-Q",
    "NVIDIA GeForce RTX 2060": "RTX 2060",
    "GeForce GTX 1650 SUPER": "GTX 1650 SUPER",
    "NVIDIA GeForce GTX 1650 Ti": "GTX 1650 Ti Laptop",
    "NVIDIA GeForce GTX 1660 SUPER": "GTX 1660 SUPER",
    "NVIDIA GeForce GTX 1660": "GTX 1660",
    "NVIDIA GeForce RTX 2070 SUPER": "RTX 2070 SUPER",
    "NVIDIA GeForce RTX 2080 SUPER": "RTX 2080 SUPER",
    "NVIDIA GeForce RTX 3090": "RTX 3090",
    "NVIDIA GeForce RTX 4080": "RTX 4080",
    "NVIDIA GeForce RTX 4060": "RTX 4060",
    "NVIDIA GeForce RTX 5080": "RTX 5080",
    "AMD Instinct MI250X": "MI250X",
    "AMD Instinct MI250": "MI250",
    "AMD Instinct MI210": "MI210",
    "AMD Instinct MI300A": "MI300A",
    "AMD Instinct MI355X": "MI355X",
    "AMD Radeon RX 7900 XTX": "RX 7900 XTX",
    "AMD Radeon RX 7900 XT": "RX 7900 XT",
    "AMD Radeon PRO W7900": "W7900",
    "AMD Instinct MI300X": "MI300X",
    "AMD Instinct MI325X": "MI325X",
}


@pytest.mark.parametrize(("device", "expected"), sorted(DEVICE_NAMES.items()))
def test_lookup_device_names(device: str, expected: str) -> None:
    m = machines.lookup_device(device)
    assert m is not None and m.name == expected
    # exactly one entry claims the name: the table order must never decide
    assert [x.name for x in ALL if x.matches(device)] == [expected]


@pytest.mark.parametrize(
    "device",
    [
        "NVIDIA H100",  # SXM, PCIe and NVL share it: the roofs differ, so no guess
        "NVIDIA GeForce RTX 4090 D",
        "NVIDIA GH100",
        "NVIDIA GeForce RTX 3060 Ti Laptop GPU",
        "",
    ],
)
def test_unknown_or_ambiguous_devices_are_none(device: str) -> None:
    assert machines.lookup_device(device) is None


def _fixture_device_names(root: Path) -> set[str]:
    # `grep -h` over the real exports, as the brief says: every quoted NVIDIA/GeForce/Tesla name.
    out = subprocess.run(
        ["grep", "-rhoaE", r'"(NVIDIA |GeForce |Tesla )[^"]{2,40}"', str(root / "csv"),
         str(root / "converted"), str(root / "synthetic")],
        capture_output=True, text=True, check=False,
    ).stdout
    names = {line.strip('"') for line in out.splitlines()}
    # device names only (the same pattern also catches e.g. "NVIDIA Nsight Compute" strings)
    return {n for n in names if re.search(r"\d", n) and "Nsight" not in n}


def test_every_device_in_the_shared_exports_resolves(shared_fixtures: Path) -> None:
    names = _fixture_device_names(shared_fixtures)
    assert "NVIDIA A100-SXM4-40GB" in names and "NVIDIA B200" in names
    unresolved = sorted(n for n in names if machines.lookup_device(n) is None)
    assert unresolved == []
    for n in names:
        assert len([m for m in ALL if m.matches(n)]) == 1, n


def test_trace_device_properties_resolve(shared_fixtures: Path) -> None:
    import gzip

    with gzip.open(shared_fixtures / "traces" / "hta__triton_example.json.gz", "rt") as fh:
        props = json.load(fh)["deviceProperties"]
    assert {machines.lookup_device(p["name"]).name  # type: ignore[union-attr]
            for p in props} == {"A100 SXM4 40GB"}
    kineto = json.loads((shared_fixtures / "traces" / "kineto__after_fix_trace.json").read_text())
    assert {p["name"] for p in kineto["deviceProperties"]} == {"NVIDIA H100"}
    assert machines.lookup_device("NVIDIA H100") is None


# ---------------------------------------------------------------- load(): names, aliases, files


@pytest.mark.parametrize("spec",
                         ["h100-sxm", "H100-SXM", "H100 SXM", "h100_sxm", "  H100-SXM5 ", "h100-80gb-hbm3"])
def test_load_by_name_or_alias_case_insensitive(spec: str) -> None:
    assert machines.load(spec).name == "H100 SXM"


@pytest.mark.parametrize(("family", "entries"), [
    ("a100", ["A100 SXM4 40GB", "A100 SXM4 80GB", "A100 PCIe 40GB", "A100 PCIe 80GB"]),
    ("H100", ["H100 SXM", "H100 PCIe", "H100 NVL"]),
    ("v100", ["V100 SXM2", "V100 PCIe"]),
    ("NVIDIA H100", ["H100 SXM", "H100 PCIe", "H100 NVL"]),  # a generic device name: the same refusal
])
def test_family_name_is_refused_with_its_entries_listed(family: str, entries: list[str]) -> None:
    with pytest.raises(MachineError) as exc:
        machines.resolve(family)
    text = str(exc.value)
    assert "family name" in text and ", ".join(entries) in text and f"--machine '{entries[0]}'" in text
    assert "\n" not in text
    assert machines.family_names()[family.split()[-1].casefold()] == entries


def test_no_alias_is_a_family_name() -> None:
    # an alias that several boards fit would pick one silently; the peaks differ by board
    families = set(machines.family_names())
    assert {"a100", "h100", "v100"} <= families
    assert not families & {machines._normal(a) for m in ALL for a in (m.name, *m.aliases)}


def test_unknown_name_lists_close_names() -> None:
    with pytest.raises(MachineError) as exc:
        machines.load("h10")
    text = str(exc.value)
    assert "h10" in text and "h100" in text and "nsroof machines" in text
    assert "\n" not in text


def test_json_round_trip(tmp_path: Path) -> None:
    for m in ALL:
        path = tmp_path / f"{m.name}.json"
        m.save(path)
        back = machines.load(path)
        assert back.to_dict() == m.to_dict()
        assert back.path == str(path) and back.label == f"spec:{m.name}"


def test_hand_written_profile_defaults_to_file_source(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"name": "my box", "peak_flop_per_s": {"fp32": 1e12},
                                "bandwidth_bytes_per_s": {"dram": 1e11}}))
    m = machines.load(str(path))
    assert m.source == "file" and m.label == f"file:{path}"
    assert m.ridge_flop_per_byte("fp32") == pytest.approx(10.0)  # 1e12 / 1e11


def test_measured_profile_keeps_its_label(tmp_path: Path) -> None:
    path = tmp_path / "h100-measured.json"
    Machine(name="measured h100", source="measured", peak_flop_per_s={"bf16": 7e14},
            bandwidth_bytes_per_s={"dram": 3e12}, points=[{"kind": "gemm", "flop_per_s": 7e14}]).save(path)
    m = machines.load(path)
    assert m.label == "measured:h100-measured.json" and m.points == [{"kind": "gemm", "flop_per_s": 7e14}]


@pytest.mark.parametrize(
    ("content", "line", "needle"),
    [
        ('{"name": "x",\n "peak_flop_per_s": {"fp32": }\n}', 2, "invalid JSON"),
        ('[1, 2]', 1, "one JSON object"),
        ('{"name": "x", "peak_flop_per_s": {"fp32": "fast"}}', None, "not a number"),
        ('{"name": "x", "bandwidth_bytes_per_s": {"dram": -5}}', None, "positive"),
        ('{"peak_flop_per_s": {}}', None, "name"),
    ],
)
def test_bad_profile_files_are_clear_one_line_errors(tmp_path: Path, content: str, line: int | None,
                                                     needle: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(NsroofError) as exc:
        machines.load(path)
    err = exc.value
    assert isinstance(err, InputError) and err.path == str(path) and err.line == line
    assert needle in str(err) and "\n" not in str(err)


def test_missing_profile_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such machine profile file"):
        machines.load(tmp_path / "nope.json")


def test_readme_table_is_generated_from_the_data(repo: Path) -> None:
    doc = repo / "docs" / "readme" / "machines.md"
    # a tracked file: missing is a failure, never a skip
    assert doc.is_file(), f"{doc} is missing (tracked in git: restore it)"
    assert machines.markdown_table() in doc.read_text(encoding="utf-8"), (
        "regenerate the table: python -c 'from nsroof.roofs.machines import markdown_table; "
        "print(markdown_table())'"
    )


@pytest.mark.parametrize(
    ("export", "tolerance"),
    [
        ("alprielse__2025-04-21-77_06-MT", 0.01),  # A100 SXM4 40GB: 1555.0 spec vs 1555.1 GB/s ncu
        ("averyclapp__profile_output", 0.01),  # A10G: 600 vs 598.5
        ("alprielse__silu-2025-04-18-v1", 0.01),  # GH200: 4000 vs 4021.6
        ("speedyscan__profile", 0.035),  # RTX 3070: 448 vs 435.5
    ],
)
def test_spec_dram_matches_ncus_own_ceiling(shared_fixtures: Path, export: str, tolerance: float) -> None:
    # ncu's roofline ceiling = dram__bytes.sum.peak_sustained x dram__cycles_elapsed.avg.per_second at
    # the profiled memory clock; the datasheet figure for the device it names must agree
    from nsroof import importers

    k = importers.read(shared_fixtures / "converted" / f"{export}.raw_base.csv")[0]
    ncu = float((k["dram__bytes.sum.peak_sustained"] * k["dram__cycles_elapsed.avg.per_second"]).median())
    m = machines.lookup_device(str(k["device"].iloc[0]))
    assert m is not None
    assert m.bandwidth_bytes_per_s["dram"] == pytest.approx(ncu, rel=tolerance)


# ---------------------------------------------------------------- rate-table keys are validated


def _write(tmp_path: Path, profile: dict[str, object]) -> Path:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    return path


@pytest.mark.parametrize(
    ("profile", "needles"),
    [  # a misspelled key would silently leave that roof unknown
        ({"name": "x", "peak_flop_per_s": {"fp23": 1e13}, "bandwidth_bytes_per_s": {"dram": 1e12}},
         ["unknown key 'fp23' in 'peak_flop_per_s'", "fp32"]),
        ({"name": "x", "peak_flop_per_s": {"fp32": 1e13}, "bandwidth_bytes_per_s": {"hbm": 1e12}},
         ["unknown key 'hbm' in 'bandwidth_bytes_per_s'", "dram"]),
        ({"name": "x", "peak_flop_per_s": {"fp32": 1e13}, "simt_flop_per_s": {"tf32": 1e13},
          "bandwidth_bytes_per_s": {"dram": 1e12}}, ["unknown key 'tf32' in 'simt_flop_per_s'"]),
        ({"name": "x"}, ["holds no compute peak", "no bandwidth"]),
        ({"name": "x", "bandwidth_bytes_per_s": {"dram": 1e12}}, ["holds no compute peak"]),
        ({"name": "x", "peak_flop_per_s": {"fp32": 1e13}}, ["holds no bandwidth"]),
        # only a sparse figure is no roof for dense work
        ({"name": "x", "sparse_peak_flop_per_s": {"bf16": 1e15}, "bandwidth_bytes_per_s": {"dram": 1e12}},
         ["holds no compute peak"]),
        ({"name": "x", "peak_flop_per_s": {"fp32": 1e13, "FP32": 2e13},
          "bandwidth_bytes_per_s": {"dram": 1e12}},
         ["'fp32' twice"]),
    ],
)
def test_profiles_with_unknown_keys_or_no_roofs_are_refused(tmp_path: Path, profile: dict[str, object],
                                                            needles: list[str]) -> None:
    path = _write(tmp_path, profile)
    with pytest.raises(InputError) as exc:
        machines.load(path)
    text = str(exc.value)
    assert exc.value.path == str(path) and "\n" not in text
    for needle in needles:
        assert needle in text


def test_rate_keys_are_case_insensitive(tmp_path: Path) -> None:
    path = _write(tmp_path,
                  {"name": "x", "peak_flop_per_s": {"FP32": 1e13}, "simt_flop_per_s": {"Fp32": 1e13},
                   "bandwidth_bytes_per_s": {"DRAM": 1e12, "L2": 4e12}})
    m = machines.load(path)
    assert m.peak_flop_per_s == {"fp32": 1e13} and m.simt_flop_per_s == {"fp32": 1e13}
    assert m.bandwidth_bytes_per_s == {"dram": 1e12, "l2": 4e12}
    assert m.ridge_flop_per_byte("fp32") == pytest.approx(10.0)  # 1e13 / 1e12


def test_measured_cpu_levels_and_every_dense_dtype_are_accepted(tmp_path: Path) -> None:
    peaks = {d: 1e12 for d in sorted(DENSE_DTYPES)}
    path = _write(tmp_path, {"name": "x", "peak_flop_per_s": peaks,
                             "bandwidth_bytes_per_s": {"l1": 4e11, "l2": 2e11, "l3": 1e11, "dram": 5e10}})
    m = machines.load(path)
    assert (set(m.peak_flop_per_s) == DENSE_DTYPES
            and set(m.bandwidth_bytes_per_s) == {"l1", "l2", "l3", "dram"})


def test_issue_19_peaks_that_other_roofs_read() -> None:
    # A10G: no NVIDIA datasheet; tensor peaks from the A10's per-SM rate: 80 SMs x 1024 FLOP/cycle x 1.71 GHz
    # = 140.1e12
    a10g = machines.load("A10G")
    assert a10g.peak_flop_per_s["fp16"] == pytest.approx(80 * 1024 * 1.71e9, rel=1e-9)
    # FP64 tensor-core (DMMA) peaks where the datasheet has one: A100 19.5, H100 SXM 67, H100 PCIe 51 TFLOP/s
    assert machines.load("A100 SXM4 80GB").peak_flop_per_s["fp64_tensor"] == 19.5e12
    assert machines.load("H100 SXM").peak_flop_per_s["fp64_tensor"] == 67e12
    assert machines.load("H100 PCIe").peak_flop_per_s["fp64_tensor"] == 51e12
    # T4: 320 GB/s = dram__bytes.sum.peak_sustained 64 B/cycle x 5.001 GHz (a public T4 report)
    t4 = machines.load("T4")
    assert (t4.bandwidth_bytes_per_s["dram"] == 320e9
            and t4.bytes_per_cycle["dram"] * 5.001e9 == pytest.approx(320e9, rel=1e-3))


def test_one_wording_for_an_unknown_device() -> None:
    assert machines.unknown_device("") == "the export names no GPU, so no machine table entry applies"
    assert machines.unknown_device("NVIDIA Z9000") == "device 'NVIDIA Z9000' is not in the machine table"
    assert machines.unknown_device("NVIDIA H100").startswith("device 'NVIDIA H100' fits several machine "
                                                             "table entries (")
