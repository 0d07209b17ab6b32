"""Reproducible benchmarks: each module prints a table and writes JSON under benchmarks/results/."""
