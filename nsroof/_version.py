"""The package version, in the bottom layer so every module can name it without the facade."""

__version__ = "0.1.0"
