"""Thin click commands; each module holds one command and calls into the library."""
