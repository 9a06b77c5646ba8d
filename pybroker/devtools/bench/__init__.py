"""Benchmarks shipped with the package: ``pybroker bench <name>``."""
