"""Index -> retrieve round trip with the real packaged models (spaCy en_core_web_sm, all-MiniLM-L6-v2)
on the small corpus written for these tests; order invariance; the start-activation API."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest

from livingrag.config import get_settings
from livingrag.corpus import service
from livingrag.corpus.ingest import Document
from livingrag.db.engine import Database
from livingrag.retrieval.retriever import Retriever
from livingrag.types import CorpusInfo
from tests.corpus_support import CORPUS, QUESTIONS

pytestmark = [pytest.mark.db, pytest.mark.slow]


def _docs(order: list[int] | None = None) -> list[Document]:
    idx = order or list(range(len(CORPUS)))
    return [Document(CORPUS[i]["title"], CORPUS[i]["text"], source=f"test {i}") for i in idx]


@pytest.fixture(scope="module")
def setup(db: Database) -> Iterator[tuple[int, CorpusInfo, Retriever]]:
    settings = get_settings()
    tenant, _ = service.ensure_tenant(db, f"retr-{uuid.uuid4().hex[:8]}")
    corpus = service.create_corpus(db, tenant, "small", settings)
    report = service.indexer(db, tenant, corpus, settings).index_documents(_docs())
    assert report.indexed == len(CORPUS)
    retriever = service.retriever(db, tenant, corpus, settings)
    yield tenant, corpus, retriever
    retriever.close()


def test_round_trip_finds_the_gold_passages(setup: tuple[int, CorpusInfo, Retriever]) -> None:
    _, _, retriever = setup
    for question, gold in QUESTIONS:
        result = retriever.retrieve(retriever.encode(question))
        titles = [p.title for p in result.passages]
        assert set(gold) <= set(titles[: len(gold) + 1]), (question, titles)
        assert not result.dense_fallback
        scores = [p.score for p in result.passages]
        assert scores == sorted(scores, reverse=True)


def test_the_dense_term_from_the_worker_gives_the_ranking_of_one_computed_in_place(
    setup: tuple[int, CorpusInfo, Retriever],
) -> None:
    """encode() leaves the dense passage scores computing on its worker thread; retrieve() waits
    for them only when the ranking needs them. The passages are those of a ranking that computes
    the scores itself, and the timings say how long the worker took and how long retrieve waited."""
    from livingrag.retrieval.ranking import rank_passages
    from livingrag.retrieval.retriever import entity_rows

    _, _, retriever = setup
    g = retriever.graph()
    for question, _gold in QUESTIONS:
        enc = retriever.encode(question)
        assert "dense" not in enc.timings
        result = retriever.retrieve(enc)
        t = result.timings
        assert t["dense_ms"] >= 0 and t["dense_wait_ms"] >= 0
        assert t["graph_ms"] == pytest.approx(
            t["link_ms"]
            + t["propagation_ms"]
            + t["dense_wait_ms"]
            + t["passage_scoring_ms"]
            + t["ppr_ms"]
            + t.get("title_ms", 0.0)
            + t.get("prf_ms", 0.0),
            abs=0.5,
        )
        again = rank_passages(g, enc.embedding, entity_rows(result.start_activation, g), retriever.params)
        assert [int(g.passage_ids[p]) for p in again.passages] == [p.id for p in result.passages]


def test_encoding_links_exact_names_with_score_one(setup: tuple[int, CorpusInfo, Retriever]) -> None:
    _, _, retriever = setup
    enc = retriever.encode("Who founded the Aurora Quartet?")
    assert any(s.name == "Aurora Quartet" and s.score == 1.0 for s in enc.seeds), enc.seeds
    assert enc.base_activation == {s.entity_id: s.score for s in enc.seeds}
    assert enc.embedding.shape == (384,)
    for key in ("ner", "embed", "link", "encode"):
        assert key in enc.timings


def test_activations_and_tiers(setup: tuple[int, CorpusInfo, Retriever]) -> None:
    _, _, retriever = setup
    enc = retriever.encode("Where was the director of Silver Harbor born?")
    result = retriever.retrieve(enc)
    assert result.start_activation == enc.base_activation
    for eid, w in enc.base_activation.items():
        assert result.entity_tiers[eid] == 1
        assert result.final_activation[eid] >= w
    assert set(result.entity_tiers) == set(result.final_activation)
    assert max(result.entity_tiers.values()) >= 2  # bridging reached entities beyond the seeds
    names = retriever.entity_names(result.final_activation)
    assert "Marta Quell" in names.values()


def test_start_activation_replaces_the_base(setup: tuple[int, CorpusInfo, Retriever]) -> None:
    _, _, retriever = setup
    g = retriever.graph()
    kiruna = int(g.entity_ids[g.key_to_entity["kiruna"]])
    enc = retriever.encode("Where was the director of Silver Harbor born?")
    result = retriever.retrieve(enc, start_activation={kiruna: 1.0, 987_654_321: 1.0})
    assert result.start_activation == {kiruna: 1.0, 987_654_321: 1.0}
    assert result.final_activation[kiruna] >= 1.0 and result.entity_tiers[kiruna] == 1
    assert all(result.entity_tiers.get(e) != 1 for e in enc.base_activation if e != kiruna)
    assert result.passages[0].title == "Kiruna"
    # an empty start activation means no seed: dense retrieval
    assert retriever.retrieve(enc, start_activation={}).dense_fallback


def test_dense_fallback_without_entities(setup: tuple[int, CorpusInfo, Retriever]) -> None:
    _, _, retriever = setup
    result = retriever.retrieve("what is made from iron ore?")
    assert result.dense_fallback and result.final_activation == {} and result.encoding.seeds == ()
    assert result.passages[0].title == "Kiruna"
    # the fallback's ranking is the dense one, re-ranked by pseudo-relevance feedback when that is on
    assert retriever.params.prf_depth > 0
    dense = retriever.dense(result.encoding, top_k=retriever.params.prf_pool)
    assert {p.id for p in result.passages} <= {p.id for p in dense}
    plain = Retriever(
        retriever.db,
        retriever.tenant_id,
        retriever.corpus,
        extractor=retriever.extractor,
        embedder=retriever.embedder,
        params=replace(retriever.params, prf_depth=0),
    )
    try:
        again = plain.retrieve("what is made from iron ore?")
        assert [p.id for p in plain.dense(again.encoding)] == [p.id for p in again.passages]
    finally:
        plain.close()


def test_changes_are_seen_by_the_next_retrieval(db: Database) -> None:
    settings = get_settings()
    tenant, _ = service.ensure_tenant(db, f"chg-{uuid.uuid4().hex[:8]}")
    corpus = service.create_corpus(db, tenant, "small", settings)
    idx = service.indexer(db, tenant, corpus, settings)
    idx.index_documents(_docs())
    retriever = service.retriever(db, tenant, corpus, settings)
    try:
        before = retriever.retrieve("Who founded the Aurora Quartet?")
        aurora = next(p.id for p in before.passages if p.title == "Aurora Quartet")
        idx.update_passage(aurora, text="The Aurora Quartet is a string quartet founded in Turku by Pekka Lund.")
        after = retriever.retrieve("Who founded the Aurora Quartet?")
        assert after.passages[0].id == aurora and "Pekka Lund" in after.passages[0].text
        idx.delete_passages([aurora])
        gone = retriever.retrieve("Who founded the Aurora Quartet?")
        assert aurora not in [p.id for p in gone.passages]
    finally:
        retriever.close()


def test_ranking_does_not_depend_on_corpus_order(db: Database) -> None:
    settings = get_settings()
    tenant, _ = service.ensure_tenant(db, f"ord-{uuid.uuid4().hex[:8]}")
    order = list(range(len(CORPUS)))
    random.Random(3).shuffle(order)
    results = []
    for name, docs in (("a", _docs()), ("b", _docs(order))):
        corpus = service.create_corpus(db, tenant, name, settings)
        service.indexer(db, tenant, corpus, settings).index_documents(docs)
        r = service.retriever(db, tenant, corpus, settings)
        g = r.graph()
        out = []
        for q, _ in [*QUESTIONS, ("Which engineer designed harbours in Denmark?", [])]:
            res = r.retrieve(r.encode(q), top_k=len(CORPUS))
            key = {int(e): g.entity_keys[g.id_to_entity[int(e)]] for e in res.final_activation}
            out.append(
                (
                    [(p.title, round(p.score, 9)) for p in res.passages],
                    sorted((key[e], round(w, 6)) for e, w in res.final_activation.items()),
                )
            )
        r.close()
        results.append(out)
    assert results[0] == results[1]


def test_a_corpus_is_searched_with_the_preset_it_recorded(db: Database) -> None:
    from livingrag.config import RetrievalSettings, Settings
    from livingrag.errors import InvalidInput, NotFound
    from livingrag.retrieval.presets import preset_for

    # the rule: an explicitly set preset wins, else the corpus's, else the default
    assert preset_for(RetrievalSettings(), "musique") == "musique"
    assert preset_for(RetrievalSettings(preset="hotpotqa"), "musique") == "hotpotqa"
    assert preset_for(RetrievalSettings(), None) == "2wikimultihopqa"
    tenant, _ = service.ensure_tenant(db, f"preset-{uuid.uuid4().hex[:8]}")
    plain = Settings()
    corpus = service.create_corpus(db, tenant, "mq", plain, preset="musique")
    assert corpus.settings["retrieval_preset"] == "musique"
    r = Retriever.from_settings(db, tenant, corpus, plain)  # default settings: the corpus's preset
    assert (r.params.max_iterations, r.params.passage_ratio, r.params.delta, r.params.top_k_sentence) == (
        5,
        2.0,
        0.1,
        4,
    )
    r.close()
    told = Settings(retrieval=RetrievalSettings(preset="2wikimultihopqa"))
    r = Retriever.from_settings(db, tenant, corpus, told)
    assert r.params.max_iterations == 3 and r.params.top_k_sentence == 1
    r.close()
    # without --preset a corpus records the settings' preset; an unknown one is refused, nothing created
    assert service.create_corpus(db, tenant, "wk", plain).settings["retrieval_preset"] == "2wikimultihopqa"
    with pytest.raises(InvalidInput, match="unknown retrieval preset 'wixqa'"):
        service.create_corpus(db, tenant, "bad", plain, preset="wixqa")
    with pytest.raises(NotFound):
        service.get_corpus(db, tenant, "bad")


def test_a_changed_preset_is_what_the_next_question_is_searched_with(db: Database) -> None:
    from livingrag.config import Settings
    from livingrag.errors import InvalidInput
    from livingrag.retrieval.presets import PRESETS

    tenant, _ = service.ensure_tenant(db, f"setpreset-{uuid.uuid4().hex[:8]}")
    plain = Settings()
    corpus = service.create_corpus(db, tenant, "mq", plain, preset="musique")
    service.indexer(db, tenant, corpus, plain).index_documents(_docs())
    corpus = service.get_corpus(db, tenant, corpus.id)
    changed = service.set_retrieval_preset(db, tenant, "mq", "2wikimultihopqa")
    # only the preset changes: the version (so the loaded graph and experiences) and chunking stay
    assert changed.settings["retrieval_preset"] == "2wikimultihopqa" and changed.version == corpus.version
    assert {k: v for k, v in changed.settings.items() if k != "retrieval_preset"} == {
        k: v for k, v in corpus.settings.items() if k != "retrieval_preset"
    }
    assert service.get_corpus(db, tenant, corpus.id) == changed
    r = Retriever.from_settings(db, tenant, changed, plain)
    assert (r.params.max_iterations, r.params.passage_ratio, r.params.delta, r.params.top_k_sentence) == (
        3,
        0.05,
        0.4,
        1,
    )
    result = r.retrieve(r.encode(QUESTIONS[0][0]))
    assert set(QUESTIONS[0][1]) <= {p.title for p in result.passages}
    r.close()
    # an unknown preset names the known ones and changes nothing
    with pytest.raises(InvalidInput, match="unknown retrieval preset 'wixqa'; known: " + ", ".join(sorted(PRESETS))):
        service.set_retrieval_preset(db, tenant, corpus.id, "wixqa")
    assert service.get_corpus(db, tenant, corpus.id) == changed


def test_a_year_every_passage_writes_seeds_nothing(db: Database) -> None:
    """A question's link to an entity the corpus writes as a plain word in most passages (here the
    year 1999, in 24 of 25) is dropped from the seeds, so it no longer pulls its own passages up;
    with ``common_word_share`` 0 it seeds as before. The mention itself stays."""
    settings = get_settings()
    tenant, _ = service.ensure_tenant(db, f"common-{uuid.uuid4().hex[:8]}")
    corpus = service.create_corpus(db, tenant, "years", settings)
    towns = [f"Town{chr(65 + i)}vik" for i in range(24)]
    docs = [Document(t, f"{t} was founded in 1999 by fishermen from the coast.", source=t) for t in towns]
    docs.append(Document("Kiruna", "Kiruna is a mining town in Lapland, built on iron ore.", source="k"))
    service.indexer(db, tenant, corpus, settings).index_documents(docs)
    retriever = service.retriever(db, tenant, corpus, settings)
    plain = service.retriever(db, tenant, corpus, settings, common_word_share=0.0)
    try:
        g = retriever.graph()
        year = g.key_to_entity["1999"]
        assert g.is_common_word(year, 0.005)  # 24 of 25 passages, over the floor of 20
        question = "Which town was founded in 1999?"
        enc = retriever.encode(question)
        assert "1999" in enc.mentions
        assert all(s.name != "1999" for s in enc.seeds)
        assert enc.common_words == ("1999",)  # said, so a trace can show why it seeds nothing
        before = plain.encode(question)
        assert any(s.name == "1999" for s in before.seeds) and before.common_words == ()
        assert int(g.entity_ids[year]) in before.base_activation
        assert int(g.entity_ids[year]) not in enc.base_activation
    finally:
        retriever.close()
        plain.close()
