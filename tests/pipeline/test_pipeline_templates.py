"""The answer pipeline's one forward pass for a question and its template (eq. 11-12): the template is
embedded with the question, only when matching compares templates, once per question form and tenant.
The fixtures (PostgreSQL, the indexed test corpus, the loopback LLM) are tests/pipeline/test_pipeline.py's."""

# ruff: noqa: F811  (the fixtures imported from tests/pipeline/test_pipeline.py are parameters here)
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from livingrag.db.engine import Database
from livingrag.experience.store import ExperienceStore
from livingrag.pipeline.answer_pipeline import LivingRAG
from livingrag.testing.openai_server import OpenAICompatServer
from livingrag.types import CorpusInfo
from tests.pipeline.test_pipeline import (  # noqa: F401  (fixtures)
    Q1,
    Q2,
    GatedVerifier,
    clean,
    indexed,
    make_rag,
    make_settings,
    server,
    store_first,
)

pytestmark = [pytest.mark.db, pytest.mark.slow]


class CountingEncoder:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    def encode(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        return self.inner.encode(texts)


def test_question_template_is_embedded_with_the_question(
    clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    from livingrag.experience.template import mask

    tenant_id, corpus = clean
    r = make_rag().retriever(tenant_id, corpus)
    enc = r.encode(Q1, template=mask)
    assert enc.template_text == mask(Q1, enc.mentions) and "[ENT]" in enc.template_text
    alone = r.embedder.encode([enc.template_text])[0]
    assert float(alone @ enc.template_embedding) > 0.9999
    plain = r.encode(Q1)
    assert plain.template_text is None and plain.template_embedding is None
    assert float(plain.embedding @ enc.embedding) > 0.9999
    assert plain.mentions == enc.mentions and plain.base_activation == enc.base_activation
    # nothing for the gazetteer: NER decides the mentions afterwards, so no template is embedded early
    assert r.encode("what is this about?", template=mask).template_text is None


def test_the_template_is_embedded_only_when_matching_compares_templates(
    clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    tenant_id, corpus = clean
    shown = make_rag()  # an OpenAI-compatible server: eq. 13's scaffold is shown, so eq. 12 needs templates
    a = shown.answer(Q1, tenant=tenant_id, corpus=corpus.name)
    assert shown.store.templates_needed and a.retrieval.encoding.template_embedding is not None
    off = make_rag(experience={"scaffold": "off"})  # no scaffold, no template floor for fusion: no second pass
    b = off.answer(Q1, tenant=tenant_id, corpus=corpus.name)
    assert not off.store.templates_needed and b.retrieval.encoding.template_embedding is None
    assert b.answer and b.retrieval.encoding.embedding is not None


class TextsEmbedded:
    """An embedder that records the texts of each forward pass (``dim`` as the wrapped one's)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.passes: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> Any:
        self.passes.append(list(texts))
        return self.inner.encode(texts)


def test_a_question_form_met_before_is_not_embedded_again(
    clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    """Once the store has a question form's template vector (here from the first question's
    write-back), a later question of that form is embedded alone, and its template vector is the
    cached one; a form never met is still embedded with its question."""
    from livingrag.experience.template import mask

    tenant_id, corpus = clean
    rag = make_rag()
    assert rag.store.templates_needed
    first = rag.answer(Q1, tenant=tenant_id, corpus=corpus.id)
    assert first.writeback is not None and first.writeback.result(timeout=120).decision == "stored"
    r = rag.retriever(tenant_id, corpus)
    spy: Any = TextsEmbedded(r.embedder)  # stands in for the SentenceEncoder
    r.embedder = spy
    same_form = "Where was the director of Brevik born?"
    a = rag.answer(same_form, tenant=tenant_id, corpus=corpus.id)
    enc = a.retrieval.encoding
    assert enc.template_text == first.retrieval.encoding.template_text == mask(same_form, enc.mentions)
    assert spy.passes[0] == [same_form]
    cached = rag.store.template_vector(tenant_id, enc.template_text)
    assert cached is not None
    np.testing.assert_allclose(enc.template_embedding, cached)
    spy.passes.clear()
    b = rag.answer("Who founded Silver Harbor?", tenant=tenant_id, corpus=corpus.id)
    assert b.retrieval.encoding.template_text is not None
    assert spy.passes[0] == ["Who founded Silver Harbor?", b.retrieval.encoding.template_text]


def test_a_cached_template_of_another_dimension_is_embedded_anew(
    clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    from livingrag.experience.template import mask

    tenant_id, corpus = clean
    r = make_rag().retriever(tenant_id, corpus)
    enc = r.encode(Q1, template=mask, known_template=lambda t: np.ones(3))
    assert enc.template_text is not None
    alone = r.embedder.encode([enc.template_text])[0]
    assert enc.template_embedding is not None and enc.template_embedding.shape == alone.shape
    assert float(alone @ enc.template_embedding) > 0.9999


def test_living_answer_embeds_nothing_extra_for_the_scaffold(
    db: Database, server: OpenAICompatServer, clean: tuple[int, CorpusInfo]
) -> None:
    """The stored experience's template vector came with its question's forward pass and was cached
    at write-back, and the new question's came with its own: the store's encoder is never called."""
    from livingrag.models.embedder import get_embedder

    tenant_id, corpus = clean
    settings = make_settings(server.base_url, "offline", experience={"findings_k": 0})
    m = settings.models
    encoder = CountingEncoder(get_embedder(m.embedding_model, m.device, m.embedding_batch_size))
    slow = GatedVerifier(delay_s=60)
    slow.release.set()
    from livingrag.experience.template import mask

    with LivingRAG(settings, db=db, store=ExperienceStore(db, settings, encoder=encoder, verifier=slow)) as rag:
        e1 = store_first(rag, tenant_id, corpus)
        first = rag.retriever(tenant_id, corpus).encode(Q1, template=mask)
        assert first.template_text is not None
        assert rag.store.template_vector(tenant_id, first.template_text) is not None  # cached on the write-back thread
        assert encoder.calls == 0  # from the question's own forward pass, not embedded again
        slow.release.clear()  # hold the next write-back in its verifier
        a = rag.answer(Q2, tenant=tenant_id, corpus=corpus.id)
        assert a.scaffold_id == e1 and a.scaffold is not None and a.scaffold.template_similarity > 0.5
        assert encoder.calls == 0
        slow.release.set()
