"""One dataset reader and one file reader: `bench retrieval`, `eval stream` and `corpus add` read the
same files the same way (fixtures in tests/fixtures/readers, in the real formats, invented content).

* ``dev/``: the development layouts of ../shared/datasets that `bench retrieval`'s former loaders
  read; the expected corpora, questions and gold passages are what those loaders produced on these
  files (measured before they were removed; on the real development sets both readers gave the same
  questions, corpus texts and gold keys for 2Wiki-1000, MuSiQue-100 and HotpotQA-100).
* ``raw_*``: a raw MuSiQue dev file (JSON lines, once named ``.jsonl`` and once ``.json``), a raw
  HotpotQA dev file and a raw 2WikiMultiHopQA ``dev.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from livingrag.bench.retrieval import BenchDataset
from livingrag.bench.retrieval import load_dataset as load_bench
from livingrag.corpus.chunking import document_key
from livingrag.corpus.ingest import read_corpus as read_corpus_file
from livingrag.errors import InvalidInput
from livingrag.evaluation.datasets import Dataset, load_dataset, read_corpus
from livingrag.io.documents import Document
from livingrag.io.records import holds_json_lines, read_records, read_structured, read_text

FIX = Path(__file__).parents[1] / "fixtures" / "readers"
DEV = FIX / "dev"

MUSIQUE_DOCS = [
    ("Mirela Harbour", "Mirela Harbour is a port town founded by the trader Osk Velin in 1702."),
    ("Osk Velin", "Osk Velin was a trader born in the village of Tarnholm."),
    ("Osk Velin", "The Osk Velin is a cargo ship launched in 1988."),
    ("Tarnholm", "Tarnholm is a village on the Brevik river."),  # " ... river.  " in the file
    ("Brevik", "The Brevik river rises in the Kessel range and flows north."),
    ("Kessel range", "The Kessel range is a chain of low mountains."),
]
HOTPOT_DOCS = [
    ("Mount Arden", "Mount Arden is a peak in the Kessel range. It is 2,100 metres high."),
    ("Pell Observatory", "Pell Observatory is an observatory on Mount Arden. It was opened in 1954."),
    ("Kessel range", "The Kessel range is a chain of low mountains."),
    ("Ivo Brand", "Ivo Brand (born 1950) is a painter."),
    ("Dara Quill", "Dara Quill (born 1931) was a poet."),  # "... poet. " in the file
]
WIKI_DOCS = [
    ("Film One", "Film One is a 1999 film."),
    ("Anselm Kore", "Anselm Kore( born 3 May 1901) was a painter. His mother was Lina Kore."),
    ("Film Two", "Film Two is a 2004 film."),
    ("Lina Kore", "Lina Kore( died 9 June 1950) was a weaver."),
]

# dataset -> (corpus name, corpus documents, [(question, gold documents as positions in the corpus)])
DEVELOPMENT = {
    "musique": (
        "bench-musique",
        MUSIQUE_DOCS,
        [
            ("Where was the founder of Mirela Harbour born?", [0, 1]),  # the trader, not the ship
            ("Where does the river by Tarnholm rise?", [4, 3]),
        ],
    ),
    "hotpotqa": (
        "bench-hotpotqa",
        HOTPOT_DOCS,
        [
            ("When was the observatory on Mount Arden opened?", [1, 0]),
            ("Who was born first, Dara Quill or Ivo Brand?", [4, 3]),
        ],
    ),
    "2wikimultihopqa": (
        "bench-2wikimultihopqa",
        WIKI_DOCS,
        [
            ("When did Anselm Kore's mother die?", [1, 3]),
            ("Which film came out first, Film One or Film Two?", [0, 2]),  # gold_corpus_idx [0, 2, 0]
        ],
    ),
}


def _keys(docs: list[tuple[str, str]]) -> list[str]:
    return [document_key(Document(title=t, text=x)) for t, x in docs]


def _as_tuples(bench: BenchDataset) -> tuple[list[tuple[str, str]], list[tuple[str, tuple[str, ...]]]]:
    return [(d.title, d.text) for d in bench.documents], [(q.question, q.gold) for q in bench.questions]


# --------------------------------------------------------------------------------------------------
# bench retrieval on the development layouts: what the former loaders gave


@pytest.mark.parametrize("name", list(DEVELOPMENT))
def test_development_layouts_read_as_the_former_loaders_did(name: str) -> None:
    corpus_name, docs, questions = DEVELOPMENT[name]
    keys = _keys(docs)
    expected = [(q, tuple(keys[i] for i in gold)) for q, gold in questions]
    for data_dir in (DEV / name, DEV):  # the dataset's folder, or the folder of all datasets
        bench = load_bench(name, data_dir)
        assert bench.name == name and bench.corpus_name == corpus_name
        assert _as_tuples(bench) == (docs, expected)


def test_the_hipporag_folder_itself_is_the_same_dataset() -> None:
    a = load_bench("musique", DEV / "musique")
    b = load_bench("musique", DEV / "musique" / "hipporag_train_100")
    assert _as_tuples(a) == _as_tuples(b) and a.corpus_name == b.corpus_name


def test_bench_and_eval_stream_read_one_dataset_and_corpus_add_one_corpus() -> None:
    """The corpus `bench retrieval` indexes is the one `eval stream` reads and `corpus add` reads."""
    for name in DEVELOPMENT:
        stream = load_dataset(name, DEV / name)
        bench = load_bench(name, DEV / name)
        assert [(d.title, d.text) for d in stream.corpus] == [(d.title, d.text) for d in bench.documents]
        corpus_file = Path(stream.sources[-1])
        assert [(d.title, d.text) for d in read_corpus_file(corpus_file)] == [
            (d.title, d.text) for d in read_corpus(corpus_file)
        ]


# --------------------------------------------------------------------------------------------------
# Raw files


def _gold_titles(ds: Dataset) -> list[list[str]]:
    return [[ds.document(k).title for k in q.gold_keys] for q in ds.questions]


@pytest.mark.parametrize(
    "path", ["raw_musique_jsonl/musique_ans_v1.0_dev.jsonl", "raw_musique_json/musique_ans_v1.0_dev.json"]
)
def test_raw_musique_dev_file_jsonl_or_json(path: str) -> None:
    f = FIX / path
    assert holds_json_lines(f.read_text())
    for data_dir in (f.parent, f):  # its folder, or the file itself
        ds = load_dataset("musique", data_dir)
        assert [q.id for q in ds.questions] == ["2hop__101_102", "2hop__201_202"]  # unanswerable dropped
        assert any("dropped 1 unanswerable" in p for p in ds.problems)
        assert {(d.title, d.text) for d in ds.corpus} == set(MUSIQUE_DOCS)  # its paragraphs, each once
        assert _gold_titles(ds) == [["Mirela Harbour", "Osk Velin"], ["Brevik", "Tarnholm"]]
        q1 = ds.questions[0]
        assert ds.document(q1.gold_keys[1]).text.startswith("Osk Velin was a trader")
        assert q1.answers == ("Tarnholm", "Tarnholm village") and q1.type == "2hop"
        assert [(s.id, s.answer, s.support_key) for s in q1.decomposition] == [
            ("101", "Osk Velin", q1.gold_keys[0]),
            ("102", "Tarnholm", q1.gold_keys[1]),
        ]
        bench = load_bench("musique", data_dir)
        assert bench.corpus_name == f"bench-reuse-musique-{f.stem}"
        assert [(d.title, d.text) for d in bench.documents] == [(d.title, d.text) for d in ds.corpus]
        key_of = {d.key: document_key(b) for d, b in zip(ds.corpus, bench.documents, strict=True)}
        assert [(q.question, q.gold) for q in bench.questions] == [
            (q.question, tuple(key_of[k] for k in q.gold_keys)) for q in ds.questions
        ]
    jsonl = load_dataset("musique", FIX / "raw_musique_jsonl")
    as_json = load_dataset("musique", FIX / "raw_musique_json")
    assert jsonl.questions == as_json.questions and jsonl.corpus == as_json.corpus


def test_raw_hotpotqa_dev_file() -> None:
    ds = load_dataset("hotpotqa", FIX / "raw_hotpotqa")
    assert [(d.title, d.text) for d in ds.corpus] == [HOTPOT_DOCS[i] for i in (0, 1, 2, 3, 4)]
    assert _gold_titles(ds) == [["Pell Observatory", "Mount Arden"], ["Dara Quill", "Ivo Brand"]]
    assert [q.type for q in ds.questions] == ["bridge", "comparison"] and ds.questions[0].answer == "1954"
    bench = load_bench("hotpotqa", FIX / "raw_hotpotqa" / "hotpot_dev_distractor_v1.json")
    keys = _keys(HOTPOT_DOCS)
    assert [q.gold for q in bench.questions] == [(keys[1], keys[0]), (keys[4], keys[3])]
    assert bench.corpus_name == "bench-reuse-hotpotqa-hotpot_dev_distractor_v1"


def test_raw_2wiki_dev_file() -> None:
    ds = load_dataset("2wikimultihopqa", FIX / "raw_2wiki")
    assert [(d.title, d.text) for d in ds.corpus] == [WIKI_DOCS[i] for i in (1, 3, 0, 2)]  # context order
    assert _gold_titles(ds) == [["Anselm Kore", "Lina Kore"], ["Film One", "Film Two"]]
    assert [q.type for q in ds.questions] == ["compositional", "comparison"]
    assert load_dataset("2wikimultihopqa", FIX / "raw_2wiki" / "dev.json").questions == ds.questions
    bench = load_bench("2wikimultihopqa", FIX / "raw_2wiki")
    keys = _keys(WIKI_DOCS)
    assert [q.gold for q in bench.questions] == [(keys[1], keys[3]), (keys[0], keys[2])]


def test_a_reader_error_names_the_file_and_the_reason(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing here")
    for name in DEVELOPMENT:
        with pytest.raises(InvalidInput, match=f"{tmp_path}: no "):
            load_bench(name, tmp_path)
    with pytest.raises(InvalidInput, match="unknown dataset 'linearrag'"):
        load_bench("linearrag", tmp_path)
    bad = tmp_path / "musique_x.json"
    lines = (FIX / "raw_musique_json/musique_ans_v1.0_dev.json").read_text().splitlines()
    bad.write_text("\n".join([lines[0], '{"id": "x", "paragraphs": ', *lines[1:]]) + "\n")
    with pytest.raises(InvalidInput, match=r"musique_x\.json: line 2: not valid JSON"):
        load_bench("musique", bad)


# --------------------------------------------------------------------------------------------------
# The file reader (livingrag.io.records) and corpus add


def test_json_lines_in_a_json_file_by_content(tmp_path: Path) -> None:
    f = tmp_path / "corpus.json"
    f.write_text('{"title": "A", "text": " a "}\n\n"b"\n')
    parsed = read_structured(f)
    assert parsed.value == [{"title": "A", "text": " a "}, "b"] and parsed.lines == (1, 3)
    assert [(d.title, d.text, d.source) for d in read_corpus_file(f)] == [
        ("A", "a", "corpus.json line 1"),
        ("", "b", "corpus.json line 3"),
    ]
    f.write_text('{"title": "A", "text": "a"}\n{"title": "B"}\n')
    with pytest.raises(InvalidInput, match=r"corpus\.json: line 2: the record has no 'text' field"):
        read_corpus_file(f)
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps([{"title": "A", "text": "a"}], indent=2))
    assert not holds_json_lines(pretty.read_text()) and read_structured(pretty).lines is None
    assert read_records(pretty) == [{"title": "A", "text": "a"}]
    one = tmp_path / "one.json"
    one.write_text('{"a": 1}\n')
    with pytest.raises(InvalidInput, match="expected a JSON list"):
        read_records(one)


def test_decode_errors_name_offset_and_line(tmp_path: Path) -> None:
    f = tmp_path / "q.jsonl"
    f.write_bytes(b'{"a": 1}\n{"b": "Malm\xf6"}\n')
    with pytest.raises(InvalidInput, match=r"q\.jsonl: not UTF-8 text \(byte 0xf6 at offset 20, line 2\)"):
        read_text(f)
    bom = tmp_path / "q.json"
    bom.write_bytes(b'\xef\xbb\xbf[{"text": "x"}]')  # a byte-order mark is dropped
    assert read_records(bom) == [{"text": "x"}]
    f.write_bytes(b'[{"text": "x"}]\n')  # .jsonl is always JSON lines: one record, a list
    assert read_records(f) == [[{"text": "x"}]]
    f.write_bytes(b"  \n")
    with pytest.raises(InvalidInput, match=r"q\.jsonl: the file is empty"):
        read_records(f)
    with pytest.raises(InvalidInput, match=r"missing\.json: no such file"):
        read_records(tmp_path / "missing.json")


def test_the_demo_reads_its_questions_with_the_same_reader() -> None:
    from livingrag.demo.run import demo_corpus_path, demo_questions

    qs = demo_questions()
    assert qs and all(q["question"] and "answer" in q for q in qs)
    assert read_corpus_file(demo_corpus_path())
