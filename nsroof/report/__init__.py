"""Report: the per-(kernel, level) roofline table, its Parquet file, terminal summary, charts and HTML."""
