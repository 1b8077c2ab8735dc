"""Dataset loaders: every format on tiny fixture files written for these tests, malformed input, and
the development sets in ../shared/datasets when that folder is present."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from livingrag.errors import InvalidInput
from livingrag.evaluation.datasets import (
    DATASET_NAMES,
    Dataset,
    Question,
    load_dataset,
    read_corpus,
    stream_orders,
)

FIX = Path(__file__).parents[1] / "fixtures" / "eval"


def _shared_datasets() -> Path | None:
    env = os.environ.get("LIVINGRAG_SHARED_DATASETS")
    if env:
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        cand = parent / "shared" / "datasets"
        if cand.is_dir():
            return cand
    return None


SHARED = _shared_datasets()
needs_shared = pytest.mark.skipif(SHARED is None, reason="../shared/datasets is not on this machine")


def gold_texts(ds: Dataset, q: Question) -> list[str]:
    return [ds.document(k).title for k in q.gold_keys]


# --------------------------------------------------------------------------------------------------
# Fixture formats


def test_musique_hipporag_layout_gold_aliases_decomposition() -> None:
    ds = load_dataset("musique", FIX / "musique")
    assert ds.name == "musique"
    assert [q.id for q in ds.questions] == ["2hop__11_12", "2hop__21_22", "1hop__31"]  # unanswerable dropped
    assert any("dropped 1 unanswerable" in p for p in ds.problems)
    assert len(ds.corpus) == 5
    q1, q2, q3 = ds.questions
    assert q1.answers == ("Tarnholm", "Tarnholm village")
    assert q1.gold_keys == ("0", "1") and gold_texts(ds, q1) == ["Mirela Harbour", "Osk Velin"]
    # two corpus passages are titled "Osk Velin": gold must match on the text, not the title
    assert ds.document(q1.gold_keys[1]).text.startswith("Osk Velin was a trader")
    assert q2.gold_keys == ("0", "1")
    assert q3.gold_keys == ("3",) and q3.type == "1hop"
    assert [(s.id, s.answer, s.support_key) for s in q1.decomposition] == [
        ("11", "Osk Velin", "0"),
        ("12", "Tarnholm", "1"),
    ]
    assert [(s.id, s.support_key) for s in q2.decomposition] == [("21", "0"), ("22", "1")]


def test_musique_without_corpus_builds_it_from_paragraphs() -> None:
    a = load_dataset("musique", FIX / "musique")
    b = load_dataset("musique", questions=FIX / "musique" / "musique_mini.json")
    assert len(b.corpus) == 5  # the paragraphs of the answerable records, each once
    for qa, qb in zip(a.questions, b.questions, strict=True):
        assert [(a.document(k).title, a.document(k).text) for k in qa.gold_keys] == [
            (b.document(k).title, b.document(k).text) for k in qb.gold_keys
        ]


def test_hotpotqa_dict_corpus_and_raw() -> None:
    ds = load_dataset("hotpotqa", FIX / "hotpotqa")
    assert (
        len(ds.corpus) == 5
        and ds.corpus[0].text == "Pell Observatory is an observatory on Mount Arden. It was opened in 1954."
    )
    h1, h2 = ds.questions
    assert gold_texts(ds, h1) == ["Pell Observatory", "Mount Arden"]
    assert gold_texts(ds, h2) == ["Dara Quill", "Ivo Brand"]  # repeated title counted once
    assert (h1.type, h2.type) == ("bridge", "comparison")
    raw = load_dataset("hotpotqa", questions=FIX / "hotpotqa" / "hotpotqa_mini.json")
    assert len(raw.corpus) == 5  # "Kessel range" appears in both contexts, kept once
    assert [gold_texts(raw, q) for q in raw.questions] == [gold_texts(ds, q) for q in ds.questions]


def test_2wiki_shared_layout() -> None:
    ds = load_dataset("2wikimultihopqa", FIX / "2wikimultihopqa")
    assert [q.gold_keys for q in ds.questions] == [("0", "1"), ("2", "3")]
    assert ds.questions[1].type == "comparison"
    assert ds.stats()["gold_coverage"] == 1.0


def test_2wiki_hipporag_layout_with_supporting_facts(tmp_path: Path) -> None:
    corpus = json.loads((FIX / "2wikimultihopqa/hipporag_1000/2wikimultihopqa_corpus.json").read_text())
    (tmp_path / "2wikimultihopqa_corpus.json").write_text(json.dumps(corpus))
    lina = ["Lina Kore", ["Lina Kore( died 9 June 1950) was a weaver."]]
    anselm = ["Anselm Kore", ["Anselm Kore( born 3 May 1901) was a painter.", " His mother was Lina Kore."]]
    q = {
        "_id": "w1",
        "type": "compositional",
        "question": "When did Anselm Kore's mother die?",
        "answer": "9 June 1950",
        "supporting_facts": [["Anselm Kore", 0], ["Lina Kore", 0]],
        "context": [lina, anselm],
    }
    (tmp_path / "2wikimultihopqa.json").write_text(json.dumps([q]))
    ds = load_dataset("2wikimultihopqa", tmp_path)
    assert ds.questions[0].gold_keys == ("0", "1")


def test_linearrag_layout_has_no_gold() -> None:
    ds = load_dataset("linearrag", FIX / "linearrag")
    assert [d.key for d in ds.corpus] == ["0", "1"] and ds.corpus[1].text.startswith("film one")
    assert not any(q.has_gold for q in ds.questions)
    assert load_dataset("linearrag", FIX / "linearrag" / "questions.json").questions == ds.questions


def test_wixqa_export() -> None:
    ds = load_dataset("wixqa", FIX / "wixqa")
    assert [q.type for q in ds.questions] == ["expertwritten", "simulated"]  # synthetic left out
    assert ds.questions[1].gold_keys == ("a200", "a100")
    assert ds.document("a100").title == "adding a booking calendar"  # from the URL
    assert ds.document("a200").title == "Refund policy for domains"
    with_synth = load_dataset("wixqa", FIX / "wixqa", wixqa_splits=("expertwritten", "simulated", "synthetic"))
    assert len(with_synth.questions) == 3


def test_generic_jsonl() -> None:
    ds = load_dataset("jsonl", FIX / "generic" / "questions.jsonl")
    g1, g2, g3 = ds.questions
    assert g1.answers == ("Alpha", "A") and g1.gold_keys == ("d1",) and g1.type == "lookup"
    assert g2.id == "1" and g2.gold_keys == ("2",)  # corpus line without id: its position; gold by title
    assert not g3.has_gold
    assert load_dataset("jsonl", FIX / "generic").questions == ds.questions


def test_limit_keeps_corpus_and_orders() -> None:
    ds = load_dataset("musique", FIX / "musique", limit=1)
    assert len(ds.questions) == 1 and len(ds.corpus) == 5
    orders = stream_orders(5, 3, seed=7)
    assert orders[0] == [0, 1, 2, 3, 4] and all(sorted(o) == [0, 1, 2, 3, 4] for o in orders)
    assert orders == stream_orders(5, 3, seed=7) and orders[1] != orders[0]


def test_skip_takes_a_later_window_and_names_a_bad_one() -> None:
    whole = load_dataset("musique", FIX / "musique")
    n = len(whole.questions)
    assert n >= 2
    later = load_dataset("musique", FIX / "musique", skip=1, limit=1)
    assert later.questions == whole.questions[1:2] and later.corpus == whole.corpus
    assert load_dataset("musique", FIX / "musique", skip=1).questions == whole.questions[1:]
    assert whole.window(0, None) is whole
    with pytest.raises(InvalidInput, match=f"skip {n} leaves no question"):
        whole.window(n, 1)
    with pytest.raises(InvalidInput, match="skip must be >= 0"):
        whole.window(-1, 1)


def test_passage_key_resolves_exact_text_and_chunks() -> None:
    ds = load_dataset("musique", FIX / "musique")
    ship = ds.corpus[4]
    assert ds.passage_key("Osk Velin", ship.text) == "4"
    assert ds.passage_key("", "cargo ship launched") == "4"  # a chunk inside one document
    assert ds.passage_key("", "Osk Velin") is None  # in several documents: ambiguous
    assert ds.passage_key("Nowhere", "no such text") is None


# --------------------------------------------------------------------------------------------------
# Errors name the file and the record


def test_unknown_name_and_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="unknown dataset"):
        load_dataset("nq", tmp_path)
    with pytest.raises(InvalidInput, match="does not exist"):
        load_dataset("musique", tmp_path / "nope")
    with pytest.raises(InvalidInput, match="no musique files"):
        load_dataset("musique", tmp_path)
    with pytest.raises(InvalidInput, match=r"chunks\.json"):
        (tmp_path / "questions.json").write_text("[]")
        load_dataset("linearrag", tmp_path)
    assert set(DATASET_NAMES) == {"2wikimultihopqa", "musique", "hotpotqa", "linearrag", "wixqa", "jsonl"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b'[{"question": ', "not valid JSON at line 1"),
        (b"\xff\xfe\x00", "not UTF-8"),
        (b'{"a": 1}', "expected a JSON list"),
    ],
)
def test_malformed_question_file(tmp_path: Path, content: bytes, message: str) -> None:
    f = tmp_path / "musique_x.json"
    f.write_bytes(content)
    with pytest.raises(InvalidInput, match=message) as e:
        load_dataset("musique", questions=f)
    assert str(f) in str(e.value)


def test_malformed_records_name_the_record(tmp_path: Path) -> None:
    recs = json.loads((FIX / "musique/musique_mini.json").read_text())
    del recs[1]["question"]
    f = tmp_path / "musique_x.json"
    f.write_text(json.dumps(recs))
    with pytest.raises(InvalidInput, match=r"musique_x.json: record 1 \(id 2hop__21_22\): missing field 'question'"):
        load_dataset("musique", questions=f)
    recs = json.loads((FIX / "musique/musique_mini.json").read_text())
    recs[0]["paragraphs"][0] = "not an object"
    f.write_text(json.dumps(recs))
    with pytest.raises(InvalidInput, match=r"record 0 .*paragraphs\[0\] must be an object"):
        load_dataset("musique", questions=f)
    f.write_text(json.dumps([{"id": "x", "question": "q", "answer": "a"}]))
    with pytest.raises(InvalidInput, match="expected 'paragraphs'"):
        load_dataset("musique", questions=f)


def test_gold_index_out_of_range_and_title_mismatch(tmp_path: Path) -> None:
    base = tmp_path / "w"
    (base / "gold_1000").mkdir(parents=True)
    (base / "hipporag_1000").mkdir()
    corpus = FIX / "2wikimultihopqa/hipporag_1000/2wikimultihopqa_corpus.json"
    (base / "hipporag_1000/2wikimultihopqa_corpus.json").write_text(corpus.read_text())
    gold = base / "gold_1000/questions_with_gold.json"
    gold.write_text(json.dumps([{"id": "w1", "question": "q", "answer": "a", "gold_corpus_idx": [0, 9]}]))
    with pytest.raises(InvalidInput, match=r"record 0 \(id w1\): gold_corpus_idx\[1\] = 9"):
        load_dataset("2wikimultihopqa", base)
    gold.write_text(
        json.dumps([{"id": "w1", "question": "q", "answer": "a", "gold_corpus_idx": [0], "gold_titles": ["Film One"]}])
    )
    with pytest.raises(InvalidInput, match="gold_titles"):
        load_dataset("2wikimultihopqa", base)


def test_malformed_corpus_and_jsonl(tmp_path: Path) -> None:
    f = tmp_path / "c.json"
    f.write_text(json.dumps([{"title": "t"}]))
    with pytest.raises(InvalidInput, match=r"c.json: passage 0: missing field 'text'"):
        read_corpus(f)
    q = tmp_path / "questions.jsonl"
    q.write_text('{"question": "q", "answer": "a"}\nnot json\n')
    (tmp_path / "corpus.jsonl").write_text('{"text": "x"}\n')
    with pytest.raises(InvalidInput, match=r"questions\.jsonl: line 2: not valid JSON"):
        load_dataset("jsonl", q)
    q.write_text('{"question": "q", "answer": "a", "gold": ["zz"]}\n')
    with pytest.raises(InvalidInput, match=r"gold key\(s\) \['zz'\] not in corpus.jsonl"):
        load_dataset("jsonl", q)


def test_unresolvable_gold_is_reported_not_guessed(tmp_path: Path) -> None:
    recs = json.loads((FIX / "hotpotqa/hotpotqa_mini.json").read_text())
    recs[0]["supporting_facts"].append(["Not In Corpus", 0])
    (tmp_path / "hotpotqa_x.json").write_text(json.dumps(recs))
    (tmp_path / "hotpotqa_x_corpus.json").write_text((FIX / "hotpotqa/hotpotqa_mini_corpus.json").read_text())
    ds = load_dataset("hotpotqa", tmp_path)
    assert ds.questions[0].gold_keys == () and ds.questions[1].has_gold
    assert any("Not In Corpus" in p for p in ds.problems)


# --------------------------------------------------------------------------------------------------
# The development sets


@needs_shared
def test_shared_2wiki() -> None:
    assert SHARED is not None
    ds = load_dataset("2wikimultihopqa", SHARED / "2wikimultihopqa")
    s = ds.stats()
    assert (s["questions"], s["documents"], s["questions_with_gold"]) == (1000, 6119, 1000)
    assert s["gold_passages_per_question"] == {2: 765, 4: 235} and s["distinct_gold_passages"] == 2339
    q = ds.questions[0]
    assert q.answer == "20 March 851" and gold_texts(ds, q) == ["Lothair II", "Ermengarde of Tours"]


@needs_shared
def test_shared_musique_and_hotpotqa() -> None:
    assert SHARED is not None
    mq = load_dataset("musique", SHARED / "musique")
    s = mq.stats()
    assert (s["questions"], s["documents"], s["questions_with_gold"]) == (100, 1890, 100)
    assert s["gold_passages_per_question"] == {2: 68, 3: 27, 4: 5} and s["questions_with_decomposition"] == 100
    assert all(sq.support_key in q.gold_keys for q in mq.questions for sq in q.decomposition)
    hq = load_dataset("hotpotqa", SHARED / "hotpotqa")
    s = hq.stats()
    assert (s["questions"], s["documents"], s["questions_with_gold"]) == (100, 994, 100)
    assert s["types"] == {"bridge": 78, "comparison": 22}


@needs_shared
def test_shared_linearrag() -> None:
    assert SHARED is not None
    ds = load_dataset("linearrag", SHARED / "2wikimultihopqa" / "linearrag_1000")
    assert (len(ds.questions), len(ds.corpus)) == (1000, 658)
    with pytest.raises(InvalidInput, match=r"chunks\.json"):
        load_dataset("linearrag", SHARED / "musique" / "linearrag_1000")


def test_bench_retrieval_reads_any_folder_the_stream_reader_reads(tmp_path: Path) -> None:
    """`bench retrieval --dataset musique --data-dir <not a development folder>`: the evaluation
    reader's corpus and gold passages, as document keys, in the corpus `bench reuse` indexes (one
    reader: no other is tried)."""
    from livingrag.bench.retrieval import load_dataset as load_bench
    from livingrag.corpus.chunking import document_key

    bench = load_bench("musique", FIX / "musique")
    stream = load_dataset("musique", FIX / "musique")
    assert bench.name == "musique" and bench.corpus_name == "bench-reuse-musique-musique_mini_corpus"
    assert [(d.title, d.text) for d in bench.documents] == [(d.title, d.text) for d in stream.corpus]
    keys = {d.key: document_key(b) for d, b in zip(stream.corpus, bench.documents, strict=True)}
    assert [q.question for q in bench.questions] == [q.question for q in stream.questions]
    assert [q.gold for q in bench.questions] == [tuple(keys[k] for k in q.gold_keys) for q in stream.questions]
    # a folder the reader cannot use: its reason
    (tmp_path / "notes.txt").write_text("nothing here")
    with pytest.raises(InvalidInput, match=r"no musique files: expected musique\*\.json \+ musique\*_corpus\.json"):
        load_bench("musique", tmp_path)
