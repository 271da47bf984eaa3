"""The names every stage reads alike: kernel names, short and fitted to a width (kernel_names), and NVTX
ranges, from ncu's cells to paths and steps (nvtx_paths). Importers write them; the report groups and prints
by them."""
