"""LinearRAG retrieval: a pure numpy/scipy core (linking, propagation, PPR, scoring) and the service.

Pure modules (no database, torch or settings import): ``graph``, ``linking``, ``propagation``,
``ppr``, ``scoring``, ``core``, ``params``. The service (:mod:`livingrag.retrieval.retriever`)
adds the models and the database-backed graph cache; ``presets`` maps settings to parameters.
"""
