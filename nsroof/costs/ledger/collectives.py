"""Collectives (`c10d::*`, `record_param_comms`, `symm_mem::*`, `vllm::all_reduce`/`all_gather`): the bytes
each GPU moves over its links, from the arguments, with the bus-bandwidth factors of nccl-tests
(NVIDIA/nccl-tests doc/PERFORMANCE.md): for n ranks and S the operation's size in bytes,

    all_reduce      busbw = algbw · 2(n − 1)/n         (S = the buffer)
    all_gather      busbw = algbw · (n − 1)/n          (S = the gathered output, n × the input)
    reduce_scatter  busbw = algbw · (n − 1)/n          (S = the input, n × the output)
    all_to_all      busbw = algbw · (n − 1)/n          (S = the buffer)
    broadcast, reduce, send/recv: busbw = algbw

so the link bytes of one call are S·factor, and the time floor is those bytes over the GPU's interconnect
bandwidth per direction (nsroof.roofs.machines.interconnect: nsroof/data/interconnect.json, from the
datasheets). An all-reduce adds S/itemsize · (n − 1)/n values per rank; the others do no arithmetic. The group
size comes from the arguments where the op has it, else from the trace's process group (OpContext.world_size).
"""

from __future__ import annotations

from typing import Any

from nsroof.costs.ledger.core import Term
from nsroof.costs.ledger.custom import Missing, OpContext, Tensor, formula

__all__ = ["FACTORS", "SRC_NCCL_TESTS", "bus_factor", "collective_terms"]

SRC_NCCL_TESTS = "NVIDIA/nccl-tests doc/PERFORMANCE.md bus-bandwidth factors"

FACTORS: dict[str, tuple[str, float]] = {  # kind -> (formula text, factor as a function of n below)
    "all_reduce": ("2(n − 1)/n", 2.0), "all_gather": ("(n − 1)/n", 1.0), "reduce_scatter": ("(n − 1)/n", 1.0),
    "all_to_all": ("(n − 1)/n", 1.0), "broadcast": ("1", 0.0), "reduce": ("1", 0.0), "send_recv": ("1", 0.0),
}


def bus_factor(kind: str, ranks: int) -> float:
    text, scale = FACTORS[kind]
    return 1.0 if scale == 0.0 else scale * (ranks - 1) / ranks


def collective_terms(kind: str, size_bytes: float, itemsize: float, ranks: int) -> list[Term]:
    if ranks < 1:
        raise Missing("the process group size")
    factor = bus_factor(kind, ranks)
    items = [Term(f"{kind} over the links", bytes=size_bytes * factor,
                  note=f"S·{FACTORS[kind][0]} = {size_bytes:,.0f} B·{factor:.4g}, n = {ranks} (busbw bytes)")]
    if kind == "all_reduce":
        items.append(Term("reduce", flops=size_bytes / itemsize * (ranks - 1) / ranks,
                          note="(n − 1)/n adds per element"))
    return items


def _ranks(context: OpContext, explicit: int | None = None) -> int:
    ranks = explicit or context.world_size
    if not ranks:
        raise Missing("the process group size (the trace's distributedInfo world_size)")
    return ranks


@formula("symm_mem::multimem_all_reduce_", source=SRC_NCCL_TESTS, roof="link", _user=False)
def multimem_all_reduce(x: Tensor, *, context: OpContext) -> list[Term]:
    """multimem_all_reduce_(Tensor! input, str reduce_op, str group_name): NVLS all-reduce in place."""
    return collective_terms("all_reduce", x.nbytes, x.itemsize, _ranks(context))


@formula("symm_mem::one_shot_all_reduce", source=SRC_NCCL_TESTS, roof="link", _user=False)
def one_shot_all_reduce(x: Tensor, *, context: OpContext) -> list[Term]:
    """one_shot_all_reduce(Tensor input, str reduce_op, str group_name)."""
    return collective_terms("all_reduce", x.nbytes, x.itemsize, _ranks(context))


@formula("vllm::all_reduce", source=SRC_NCCL_TESTS, roof="link", _user=False)
def vllm_all_reduce(x: Tensor, *, context: OpContext) -> list[Term]:
    """all_reduce(Tensor tensor, str group_name) -> Tensor."""
    return collective_terms("all_reduce", x.nbytes, x.itemsize, _ranks(context))


@formula("vllm::all_gather", source=SRC_NCCL_TESTS, roof="link", _user=False)
def vllm_all_gather(x: Tensor, dim: int | None, world_size: int | None, *, context: OpContext) -> list[Term]:
    """all_gather(Tensor tensor, int dim, int world_size, str group_name): output = world_size × input."""
    n = _ranks(context, world_size)
    return collective_terms("all_gather", x.nbytes * n, x.itemsize, n)


@formula("c10d::allreduce_", source=SRC_NCCL_TESTS, roof="link", _user=False)
def c10d_allreduce(tensors: list[Tensor], *, context: OpContext) -> list[Term]:
    """allreduce_(Tensor[] tensors, process_group, reduce_op, sparse_indices, timeout)."""
    return collective_terms("all_reduce", sum(t.nbytes for t in tensors), tensors[0].itemsize,
                            _ranks(context))


@formula("c10d::_allgather_base_", source=SRC_NCCL_TESTS, roof="link", _user=False)
def c10d_allgather_base(output: Tensor, x: Tensor, *, context: OpContext) -> list[Term]:
    """_allgather_base_(Tensor output, Tensor input, process_group, async_op, timeout): n = output/input."""
    return collective_terms("all_gather", output.nbytes, x.itemsize, max(output.numel // max(x.numel, 1), 1))


@formula("c10d::_reduce_scatter_base_", source=SRC_NCCL_TESTS, roof="link", _user=False)
def c10d_reduce_scatter_base(output: Tensor, x: Tensor, *, context: OpContext) -> list[Term]:
    """_reduce_scatter_base_(Tensor output, Tensor input, process_group, reduce_op, async_op, timeout)."""
    return collective_terms("reduce_scatter", x.nbytes, x.itemsize, max(x.numel // max(output.numel, 1), 1))


@formula("c10d::broadcast_", source=SRC_NCCL_TESTS, roof="link", _user=False)
def c10d_broadcast(tensors: list[Tensor], *, context: OpContext) -> list[Term]:
    """broadcast_(Tensor[] tensors, process_group, root_rank, root_tensor, async_op, timeout)."""
    return collective_terms("broadcast", sum(t.nbytes for t in tensors), tensors[0].itemsize, 1)


@formula("c10d::alltoall_base_", source=SRC_NCCL_TESTS, roof="link", _user=False)
def c10d_alltoall_base(output: Tensor, x: Tensor, *, context: OpContext) -> list[Term]:
    """alltoall_base_(Tensor output, Tensor input, process_group, output_split_sizes, input_split_sizes,
    …)."""
    return collective_terms("all_to_all", x.nbytes, x.itemsize, _ranks(context))


_PARAM_COMMS = {"allreduce": "all_reduce", "all_reduce": "all_reduce", "_allgather_base": "all_gather",
                "allgather": "all_gather", "all_gather": "all_gather",
                "allgather_into_tensor_coalesced": "all_gather", "_reduce_scatter_base": "reduce_scatter",
                "reduce_scatter": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
                "all_to_all": "all_to_all", "all_to_allv": "all_to_all", "alltoall_base": "all_to_all",
                "broadcast": "broadcast", "reduce": "reduce", "send": "send_recv", "recv": "send_recv"}


@formula("record_param_comms", source=SRC_NCCL_TESTS + "; torch's record_param_comms attributes", roof="link",
         _user=False)
def record_param_comms(x: Tensor | None, *, context: OpContext) -> list[Term]:
    """record_param_comms: the collective's name, element counts, dtype and group size are event attributes
    ('Collective name', 'In msg nelems', 'Out msg nelems', 'dtype', 'Group size')."""
    a = context.args
    name = str(a.get("Collective name", ""))
    kind = _PARAM_COMMS.get(name)
    if kind is None:
        raise Missing(f"a known collective in record_param_comms' 'Collective name' (got {name or 'none'!r})")
    from nsroof.costs.ledger.core import DTYPE_BYTES, LedgerError, canonical_dtype

    try:
        itemsize = DTYPE_BYTES[canonical_dtype(str(a.get("dtype", "")))]
    except LedgerError:
        raise Missing(f"record_param_comms dtype {a.get('dtype')!r} has no byte size") from None
    n = _ranks(context, _int(a.get("Group size")))
    elements = {"all_gather": a.get("Out msg nelems"),
                "reduce_scatter": a.get("In msg nelems")}.get(kind, a.get("In msg nelems"))
    if _int(elements) is None:
        raise Missing("record_param_comms' 'In msg nelems' / 'Out msg nelems'")
    return collective_terms(kind, float(_int(elements) or 0) * itemsize, itemsize, n)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
