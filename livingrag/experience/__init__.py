"""The experience store (LivingRAG, paper sections 3.3-3.5).

Pure math lives in small modules with no database, torch or settings import:
:mod:`similarity`, :mod:`matching` (eq. 7), :mod:`fusion` (eq. 8-10), :mod:`sparsify` (eq. 5),
:mod:`template` (eq. 11), :mod:`scaffold` (eq. 12-13), :mod:`keysent` (eq. 6),
:mod:`novelty` (eq. 17-18) and :mod:`grounding` (eq. 15-16). :mod:`verifiers` scores claims
against evidence; :mod:`scaffold_policy` reads from the settings whether the prompt shows a
scaffold and masks its names. :mod:`store` is the experience store, a facade over
:mod:`store_matching` (eq. 7-13 before retrieval) and :mod:`store_writeback` (the gates and the
insert after answering, eq. 5-6 and 15-19), with :mod:`store_input` (pure) checking what callers
give it; their SQL is in :mod:`livingrag.db.repositories.experience_candidates` (the preselection)
and :mod:`livingrag.db.repositories.experiences`. This package's ``__init__`` imports nothing so
the pure modules stay light.
"""
