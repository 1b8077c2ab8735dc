"""Repositories own the SQL. They take a session and never commit: callers own transactions."""
