"""The ``livingrag`` command line (typer). Thin: every command calls the Python API."""
