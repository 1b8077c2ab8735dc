"""Evaluation: benchmark loaders, metrics, per-query records, reuse analyses and the report."""
