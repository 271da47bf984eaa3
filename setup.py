"""The one compiled part of nsroof: the details-page prefix scan (nsroof/importers/_rowscan.c).

Everything else is declared in pyproject.toml. The extension is optional: where no C compiler is at
hand the install goes on and nsroof.importers.ncu.csv_export uses its pure-Python scan (same rows, slower).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("nsroof.importers._rowscan", ["nsroof/importers/_rowscan.c"], optional=True)])
