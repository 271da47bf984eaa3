"""Nsight Compute's formats, each with its one `read(...)` entry: CSV exports of the raw and details pages
(`csv_export/`), .ncu-rep reports (`rep`) and ncu's text output (`text`). What they read alike, one module
per thing read:

- `csv_bytes`: the bytes of a CSV export (gzip, BOM, preamble, header, blocks of whole rows);
- `locale_numbers`: numbers as ncu prints them in the profiling host's locale, one style per file;
- `section_labels`: details-page section labels -> metric names;
- `rep_container`: the framing of a .ncu-rep file, checked before any library reads it.

Kernel names and NVTX cells, which the report reads too, are in nsroof.names.
"""
