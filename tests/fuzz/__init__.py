"""The importer fuzz harness (issue 15): see tests/fuzz/harness.py."""
