"""Stage 2, counters: what the measured counters say of each kernel. The counter formula table
(metric_formulas), the tensor-core paths per GPU generation (tensor_paths), each counter's dimension and unit
(dimensions), the per-kernel roofline quantities derived from any importer's kernel table (quantities) and
busy time (timeline)."""
