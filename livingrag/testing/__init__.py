"""Test and benchmark support that ships with the package (no test framework needed)."""
