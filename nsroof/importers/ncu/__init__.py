"""What every Nsight Compute importer reads the same way, one module per thing read:

- `csv_bytes`: the bytes of a CSV export (gzip, BOM, preamble, header, blocks of whole rows);
- `locale_numbers`: numbers as ncu prints them in the profiling host's locale, one style per file;
- `section_labels`: details-page section labels -> metric names;
- `kernel_names`: demangled kernel names -> short function names, and names fitted to a width;
- `nvtx_columns`: ncu's NVTX columns -> range names, paths and steps;
- `rep_container`: the framing of a .ncu-rep file, checked before any library reads it.

The format modules (`ncu_csv`, `ncu_rep`, `ncu_text`) each keep their one `read(...)` entry and share these.
"""
