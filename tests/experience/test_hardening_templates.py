"""Issue 42, item 9: the question-template embedding cache (eq. 12) is kept per tenant. A template
another tenant's questions put into the cache is never a hit for this tenant: whether a question
form was met (and how fast it is answered) says nothing about other tenants' questions."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from sqlalchemy import text

from livingrag.db.engine import Database
from tests.experience_helpers import HashingEncoder, candidate, make_corpus, make_store, unit

pytestmark = pytest.mark.db


def test_a_template_cached_for_one_tenant_is_not_a_hit_for_another(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    a, _ = make_tenant("tpl-a")
    b, _ = make_tenant("tpl-b")
    store = make_store(db)
    encoder = store.encoder
    assert isinstance(encoder, HashingEncoder)
    question = "Where was the director of Winter Harbour born?"
    emb = unit(8, (0, 1.0))
    for tenant in (a, b):
        corpus = make_corpus(db, tenant)
        before = encoder.calls
        out = store.write_back(candidate(tenant, corpus, emb, {1: 1.0}, query=question), gated=False)
        assert out.decision == "stored"
        # each tenant's first store of this question form embeds its template for that tenant alone
        assert encoder.calls == before + 1, tenant
        with db.tenant_session(tenant) as s:
            stored = s.execute(text("SELECT query_template FROM experiences WHERE id = :i"), {"i": out.experience_id})
            template = stored.scalar_one()
        vector = store.template_vector(tenant, template)
        assert vector is not None and np.isclose(np.linalg.norm(vector), 1.0)
    stranger, _ = make_tenant("tpl-c")
    assert store.template_vector(stranger, template) is None
