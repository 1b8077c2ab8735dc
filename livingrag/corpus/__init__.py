"""Corpus ingest, entity extraction, embeddings and the graph stored in PostgreSQL."""
