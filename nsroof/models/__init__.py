"""Models: analytic ledgers, machine ceilings and the pure roofline maths. No I/O beyond packaged data."""
