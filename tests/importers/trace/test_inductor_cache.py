"""What nsroof reads of an Inductor-generated Triton kernel file (nsroof.importers.trace.inductor_cache): the
kernel's argument names and constexprs, the numels its body fixes, the estimates in its inductor_meta; {} for
a file that is not there or not such a kernel."""

from __future__ import annotations

from pathlib import Path

from nsroof.importers.trace import inductor_cache

# The shape of a file Inductor writes (torch/_inductor/codegen/triton.py): a heuristics decorator over the
# @triton.jit kernel; the decorator's arguments hold calls (DeviceProperties) that are not literals.
KERNEL_FILE = '''
import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.hints import DeviceProperties

@triton_heuristics.pointwise(
    size_hints={'x': 1024}, filename=__file__,
    triton_meta={'signature': {'in_out_ptr0': '*fp32', 'in_ptr0': '*fp32', 'xnumel': 'i32',
                               'XBLOCK': 'constexpr'},
                 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132)},
    inductor_meta={'kernel_name': 'triton_poi_fused_add_relu_0', 'mutated_arg_names': ['in_out_ptr0']%s},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused_add_relu_0(in_out_ptr0, in_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 1024
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    tmp0 = tl.load(in_out_ptr0 + (xindex), None)
    tmp1 = tl.load(in_ptr0 + (xindex), None)
    tmp2 = tmp0 + tmp1
    tl.store(in_out_ptr0 + (xindex), tl.full([1], 0, tl.int32).to(tl.float32) + tmp2, None)
'''


def write_kernel(tmp_path: Path, estimates: str = "") -> Path:
    path = tmp_path / "cabc.py"
    path.write_text(KERNEL_FILE % estimates, encoding="utf-8")
    return path


def test_a_kernel_files_signature_numels_and_estimates(tmp_path: Path) -> None:
    path = write_kernel(tmp_path, ", 'kernel_num_gb': 1.2288e-05, 'kernel_flop': 2048")
    assert inductor_cache.facts(str(path)) == {
        "arg_names": ["in_out_ptr0", "in_ptr0", "xnumel", "XBLOCK"], "constexprs": ["XBLOCK"],
        "numels": {"xnumel": 1024}, "kernel_num_gb": 1.2288e-05, "kernel_flop": 2048}
    assert "kernel_num_gb" not in inductor_cache.facts(str(write_kernel(tmp_path)))  # rewritten: read again


def test_a_file_that_is_not_there_or_not_a_kernel_says_nothing(tmp_path: Path) -> None:
    assert inductor_cache.facts(str(tmp_path / "gone.py")) == {}
    assert inductor_cache.facts(None) == {}
    assert inductor_cache.facts(str(tmp_path)) == {}  # a folder
    (tmp_path / "plain.py").write_text("def f(x):\n    return x\n", encoding="utf-8")
    assert inductor_cache.facts(str(tmp_path / "plain.py")) == {}
    (tmp_path / "broken.py").write_text("@triton_heuristics.pointwise(\n", encoding="utf-8")
    assert inductor_cache.facts(str(tmp_path / "broken.py")) == {}
