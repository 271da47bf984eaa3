"""The machines of the seeds' tables, built from the seeds' own figures, so that the formula tests do not
depend on the packaged machine table (tests/commands/test_machines_cli.py checks the table gives the
same numbers)."""

from __future__ import annotations

from nsroof.roofs.machines import Machine

# seeds/roofline.py HW table: dense peak at the stated dtype, DRAM bandwidth
H100 = Machine("h100", peak_flop_per_s={"bf16": 989.4e12}, bandwidth_bytes_per_s={"dram": 3.35e12})
A100 = Machine("a100", peak_flop_per_s={"bf16": 312e12}, bandwidth_bytes_per_s={"dram": 2.039e12})
CPU = Machine("cpu-server", peak_flop_per_s={"fp32": 5.1e12}, bandwidth_bytes_per_s={"dram": 307e9})
LAPTOP = Machine("laptop", peak_flop_per_s={"fp32": 1.0e12}, bandwidth_bytes_per_s={"dram": 200e9})
# seeds/memory_hierarchy.md: 125 TFLOP/s fp16 tensor, 15.7 fp32, 900 GB/s DRAM, 3.1 TB/s L2
V100 = Machine("v100", peak_flop_per_s={"fp16": 125e12, "fp32": 15.7e12},
               bandwidth_bytes_per_s={"dram": 900e9, "l2": 3.1e12})
