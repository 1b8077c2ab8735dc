"""Reading files: bytes to text, JSON and JSON lines, and the document type read from them.

The bottom layer, shared by corpus ingest and the dataset readers: no database, settings or model
import.
"""
