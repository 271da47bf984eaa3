"""Frame helpers every stage shares: distinct-value coding of columns (distinct), nullable integer arrays
built from numpy values and a mask (arrays), and text columns read as object arrays of str (columns)."""
