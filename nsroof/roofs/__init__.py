"""Stage 4, roofs: machine ceilings and the roofline maths. Machine profiles as data (machines), every roof of
a kernel with its source (ceilings), the pure roofline formulas (roofline), the per-level classification of
kernel and op rows (classify), launches merged before it (aggregate), an operator of the ledger against a
machine (ledger_analysis, ledger_tables) and the ledger-mapping join (ledger_join)."""
