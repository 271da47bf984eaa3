"""Frame helpers every stage shares: distinct-value coding of columns (distinct) and nullable integer arrays
built from numpy values and a mask (arrays)."""
