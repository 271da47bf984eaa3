"""torch's own FLOP counts (torch.utils.flop_counter), which the readers' tests compare with."""

from __future__ import annotations


def flop_counter(fn, *args) -> int:  # type: ignore[no-untyped-def]
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn(*args)
    return int(counter.get_total_flops())


def flop_registry_count(op, *args, **kwargs) -> int:  # type: ignore[no-untyped-def]
    from torch.utils.flop_counter import flop_registry

    return int(flop_registry[op](*args, **kwargs))
