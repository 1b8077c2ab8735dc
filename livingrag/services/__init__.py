"""What the HTTP API and the command line call to read and change tenants, keys, experiences and
the store's insights: each function owns its transaction (it opens the tenant's, or for the
operator the owner's, session) and calls the repositories (:mod:`livingrag.db.repositories`),
which own the SQL. ``api`` and ``cli`` never import the repositories themselves (import-linter's
``interfaces-use-services`` contract). The corpus's own service is :mod:`livingrag.corpus.service`.

This package's ``__init__`` imports nothing: each module sits in its own place among the layers.
"""
