"""torch.profiler / kineto chrome traces (CUDA and ROCm): the declared event schema (events), the reading
(load), the op tree (op_tree), graph replays matched to their captures (graphs) and the format's read()
(kineto)."""
