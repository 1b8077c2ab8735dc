"""Benchmark harnesses behind ``livingrag bench ...`` that belong to no domain package."""
