"""The nvtx package before its domain objects had range methods (<= 0.2.11), behind the domain interface
nsroof.collectors.nvtx_ranges uses."""

from __future__ import annotations

from typing import Any


class LegacyDomain:
    """The nvtx package before its domain objects had range methods (<= 0.2.11, the last whose ranges
    Nsight Systems 2023.4 records): its module-level calls, with the domain named. Messages are text; every
    domain is a real one, so a tool listens whenever one is injected (nvtx_ranges._is_dummy)."""

    name = "nvtx"

    def __init__(self, module: Any, domain: str) -> None:
        self._nvtx, self._domain = module, domain

    def push_range(self, attributes: Any) -> None:
        self._nvtx.push_range(attributes, domain=self._domain)

    def pop_range(self) -> None:
        self._nvtx.pop_range(domain=self._domain)

    def start_range(self, attributes: Any) -> Any:
        return self._nvtx.start_range(attributes, domain=self._domain)

    def end_range(self, range_id: Any) -> None:
        self._nvtx.end_range(range_id)

    def mark(self, attributes: Any) -> None:
        self._nvtx.mark(attributes, domain=self._domain)

    def get_event_attributes(self, message: str, *args: Any) -> Any:
        return message
