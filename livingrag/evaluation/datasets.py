"""Benchmark loaders: every question/corpus format livingrag evaluates on, read into one typed structure.

A :class:`Dataset` is a stream of :class:`Question` (id, text, gold answer + aliases, gold passages as
corpus keys, question type, MuSiQue decomposition when present) over a corpus of :class:`Document`
``{key, title, text}``. Gold passages are always given as corpus *keys*, never as titles, so recall is
a set comparison against the keys of retrieved passages (:meth:`Dataset.passage_key` maps a retrieved
passage back to its key).

Formats (``load_dataset(name, data_dir)``; the names are the CLI's ``--dataset`` values):

``2wikimultihopqa``
    The shared layout (``gold_1000/questions_with_gold.json`` with ``gold_corpus_idx`` = 0-based
    positions in ``hipporag_1000/2wikimultihopqa_corpus.json``), or HippoRAG's own layout
    (``2wikimultihopqa.json`` with ``supporting_facts`` + ``2wikimultihopqa_corpus.json``).
``musique``
    Raw MuSiQue records (20 ``paragraphs`` with ``is_supporting``, ``question_decomposition``,
    ``answer_aliases``): HippoRAG's ``musique*.json`` + ``musique*_corpus.json`` pair, or the official
    ``musique*.jsonl`` alone (the corpus is then the de-duplicated paragraphs). Unanswerable records of
    MuSiQue-Full are dropped (and counted in ``problems``).
``hotpotqa``
    Raw HotpotQA records (``context``, ``supporting_facts``): HippoRAG's ``hotpotqa*.json`` +
    ``hotpotqa*_corpus.json`` (a list of ``{title, text}`` or an object ``title -> [sentences]``), or a
    raw ``hotpot*.json`` alone (the corpus is then the de-duplicated context paragraphs).
``linearrag``
    LinearRAG's ``questions.json`` + ``chunks.json`` (strings ``"<n>:<text>"``); no gold passages.
``wixqa``
    Files exported from the Hugging Face dataset ``Wix/WixQA`` (JSON lines or a JSON list, one file per
    config): ``wixqa_expertwritten*`` and ``wixqa_simulated*`` with ``question``, ``answer``,
    ``article_ids``; ``wix_kb_corpus*`` with ``id``, ``contents`` and optionally ``title``/``url``. The
    paper's stream is ExpertWritten + Simulated (400); Synthetic is left out unless asked for.
``jsonl``
    Generic: a questions file (``.jsonl``, one object a line: ``question``; ``answer`` or ``answers``;
    optional ``id``, ``aliases``, ``type``, ``gold`` = corpus keys or ``gold_titles``) and a corpus file
    (``.jsonl`` or ``.json``: ``text``; optional ``id``/``key`` and ``title``).

Corpus keys are the document's position in its corpus file (``"0"``, ``"1"``, ...) unless the file
gives ids (LinearRAG's ``<n>:`` prefix, WixQA article ids, a generic ``id``/``key``). Malformed files
raise :class:`livingrag.errors.InvalidInput` naming the file and the record.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from livingrag.errors import InvalidInput
from livingrag.evaluation.dataset_files import (
    CorpusIndex,
    Record,
    candidate_dirs,
    corpus_document,
    find_pair,
    find_raw,
    norm_ws,
    read_corpus,
    type_of,
)
from livingrag.io.documents import Document
from livingrag.io.records import read_records

DATASET_NAMES: tuple[str, ...] = ("2wikimultihopqa", "musique", "hotpotqa", "linearrag", "wixqa", "jsonl")
"""The ``--dataset`` names the CLI accepts."""

WIXQA_DEFAULT_SPLITS: tuple[str, ...] = ("expertwritten", "simulated")


# --------------------------------------------------------------------------------------------------
# Types


@dataclass(frozen=True)
class SubQuestion:
    """One single-hop step of a MuSiQue decomposition; ``support_key`` is its supporting passage."""

    id: str
    question: str
    answer: str
    support_key: str | None


@dataclass(frozen=True)
class Question:
    """One stream item. ``gold_keys`` is empty when the format carries no (resolvable) gold passages."""

    id: str
    question: str
    answer: str
    aliases: tuple[str, ...] = ()
    gold_keys: tuple[str, ...] = ()
    type: str | None = None
    decomposition: tuple[SubQuestion, ...] = ()

    @property
    def answers(self) -> tuple[str, ...]:
        """The gold answer first, then its aliases, without duplicates or empty strings."""
        out: list[str] = []
        for a in (self.answer, *self.aliases):
            if a and a not in out:
                out.append(a)
        return tuple(out)

    @property
    def has_gold(self) -> bool:
        return bool(self.gold_keys)


@dataclass(frozen=True)
class Dataset:
    """A question stream over a corpus. ``problems`` lists non-fatal findings (e.g. unresolvable gold)."""

    name: str
    questions: tuple[Question, ...]
    corpus: tuple[Document, ...]
    sources: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    def head(self, n: int | None) -> Dataset:
        """The first ``n`` questions over the same corpus (``None``: all)."""
        return self.window(0, n)

    def window(self, skip: int, n: int | None) -> Dataset:
        """Questions ``skip+1 .. skip+n`` (1-based; ``n`` None: all after the first ``skip``) over the
        same corpus, e.g. held-out questions 301-600: ``window(300, 300)``."""
        if n is not None and n < 0:
            raise InvalidInput(f"limit must be >= 0, got {n}")
        if skip < 0:
            raise InvalidInput(f"skip must be >= 0, got {skip}")
        if skip and skip >= len(self.questions):
            raise InvalidInput(f"skip {skip} leaves no question: the dataset has {len(self.questions)}")
        if skip == 0 and (n is None or n >= len(self.questions)):
            return self
        return replace(self, questions=self.questions[skip : None if n is None else skip + n])

    @cached_property
    def _by_key(self) -> dict[str, Document]:
        return {d.key: d for d in self.corpus}

    @cached_property
    def _by_title_text(self) -> dict[tuple[str, str], str]:
        return {(d.title, norm_ws(d.text)): d.key for d in reversed(self.corpus)}

    @cached_property
    def _by_text(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for d in self.corpus:
            out.setdefault(norm_ws(d.text), []).append(d.key)
        return out

    @cached_property
    def _norm_texts(self) -> tuple[str, ...]:
        return tuple(norm_ws(d.text) for d in self.corpus)

    def document(self, key: str) -> Document:
        try:
            return self._by_key[key]
        except KeyError:
            raise InvalidInput(f"dataset {self.name}: no document with key {key!r}") from None

    def passage_key(self, title: str, text: str) -> str | None:
        """The corpus key of a retrieved passage, or None.

        Matches, in order: exact title + text (whitespace-normalised); text alone when it is unique;
        a chunk of a longer document (its text is contained in exactly one document's text, title equal
        when one is given). Indexers that keep each passage's source key should use that instead.
        """
        t = norm_ws(text)
        key = self._by_title_text.get((title, t))
        if key is not None:
            return key
        keys = self._by_text.get(t)
        if keys and len(keys) == 1:
            return keys[0]
        if not t:
            return None
        hits = [
            d.key
            for d, nt in zip(self.corpus, self._norm_texts, strict=True)
            if t in nt and (not title or d.title == title)
        ]
        return hits[0] if len(hits) == 1 else None

    def stats(self) -> dict[str, Any]:
        """Counts for reports: questions, documents, gold coverage, types, decompositions."""
        golds = [q.gold_keys for q in self.questions]
        with_gold = [g for g in golds if g]
        return {
            "name": self.name,
            "questions": len(self.questions),
            "documents": len(self.corpus),
            "questions_with_gold": len(with_gold),
            "gold_coverage": len(with_gold) / len(self.questions) if self.questions else 0.0,
            "gold_passages_per_question": dict(sorted(Counter(len(g) for g in with_gold).items())),
            "distinct_gold_passages": len({k for g in with_gold for k in g}),
            "questions_with_aliases": sum(1 for q in self.questions if q.aliases),
            "questions_with_decomposition": sum(1 for q in self.questions if q.decomposition),
            "types": dict(Counter(q.type or "" for q in self.questions).most_common()),
            "problems": len(self.problems),
        }


def stream_orders(n_questions: int, n_orders: int, seed: int) -> list[list[int]]:
    """Stream orders for Table 18: order 0 is the dataset order, orders 1.. are seeded permutations."""
    if n_orders < 1:
        raise InvalidInput(f"--orders must be >= 1, got {n_orders}")
    rng = random.Random(seed)
    orders = [list(range(n_questions))]
    for _ in range(n_orders - 1):
        perm = list(range(n_questions))
        rng.shuffle(perm)
        orders.append(perm)
    return orders


# --------------------------------------------------------------------------------------------------
# Entry point


def load_dataset(
    name: str,
    data_dir: str | Path | None = None,
    *,
    questions: str | Path | None = None,
    corpus: str | Path | None = None,
    limit: int | None = None,
    skip: int = 0,
    wixqa_splits: Sequence[str] = WIXQA_DEFAULT_SPLITS,
) -> Dataset:
    """Load the dataset ``name`` (one of :data:`DATASET_NAMES`).

    ``data_dir`` is a folder laid out like ``../shared/datasets/<name>`` (or any folder or subfolder
    holding the files the format names); for ``jsonl`` and ``linearrag`` it may also be the questions
    file itself. ``questions``/``corpus`` name the files explicitly and override discovery. ``limit``
    keeps the first N questions after the first ``skip`` (the corpus is kept whole).
    """
    if name not in DATASET_NAMES:
        raise InvalidInput(f"unknown dataset {name!r}; known: {', '.join(DATASET_NAMES)}")
    if data_dir is None and questions is None:
        raise InvalidInput(f"dataset {name}: give --data-dir (a folder, or a file for {name})")
    base = Path(data_dir) if data_dir is not None else None
    if base is not None and not base.exists():
        raise InvalidInput(f"dataset {name}: {base} does not exist")
    if base is not None and base.is_dir() and (base / name).is_dir():
        base = base / name  # the folder of all datasets (../shared/datasets): the dataset's own
    qpath = Path(questions) if questions is not None else None
    cpath = Path(corpus) if corpus is not None else None

    if name == "2wikimultihopqa":
        ds = _load_2wiki(base, qpath, cpath)
    elif name == "musique":
        ds = _load_hipporag_style(name, "musique", base, qpath, cpath, raw_globs=("musique*.jsonl", "musique*.json"))
    elif name == "hotpotqa":
        ds = _load_hipporag_style(name, "hotpotqa", base, qpath, cpath, raw_globs=("hotpot*.json",))
    elif name == "linearrag":
        ds = _load_linearrag(base, qpath, cpath)
    elif name == "wixqa":
        ds = load_wixqa(base, splits=wixqa_splits) if qpath is None else _wixqa_from_files([qpath], cpath)
    else:
        ds = _load_generic(base, qpath, cpath)
    return ds.window(skip, limit)


# --------------------------------------------------------------------------------------------------
# Question records (HippoRAG / raw MuSiQue / raw HotpotQA / 2Wiki)


def _answer_and_aliases(r: Record) -> tuple[str, tuple[str, ...]]:
    answer = r.get_str("answer", allow_empty=True)
    aliases = r.get_str_list("answer_aliases") + r.get_str_list("aliases")
    return answer, tuple(a for a in dict.fromkeys(aliases) if a and a != answer)


def _musique_question(r: Record, index: CorpusIndex, build: bool, problems: list[str]) -> Question:
    """A raw MuSiQue record. Paragraphs match the corpus on exact title + text (MuSiQue titles repeat);
    with ``build`` every paragraph is first added to the corpus being assembled."""
    paras = r.get_list("paragraphs")
    by_idx: dict[int, tuple[str, str]] = {}
    supporting: list[tuple[str, str]] = []
    for j, p in enumerate(paras):
        if not isinstance(p, dict):
            raise r.error(f"paragraphs[{j}] must be an object")
        title, text = p.get("title"), p.get("paragraph_text", p.get("text"))
        if not isinstance(title, str) or not isinstance(text, str):
            raise r.error(f"paragraphs[{j}] needs string 'title' and 'paragraph_text'")
        idx = p.get("idx", j)
        by_idx[int(idx) if isinstance(idx, int | str) and str(idx).isdigit() else j] = (title, text)
        if build:
            index.add(title, text)
        if p.get("is_supporting") is True:
            supporting.append((title, text))
    answer, aliases = _answer_and_aliases(r)
    qid = r.qid()
    gold: list[str] = []
    unresolved = 0
    for title, text in supporting:
        key = index.find(title, [text], by_title=False)
        if key is None:
            unresolved += 1
        elif key not in gold:
            gold.append(key)
    if unresolved:
        problems.append(f"{r.where}: {unresolved} supporting paragraph(s) not in the corpus; no gold for it")
        gold = []
    decomposition = []
    for j, step in enumerate(r.get_list("question_decomposition", required=False)):
        s = Record(r.path, j, step, f"record {r.index} question_decomposition item")
        sidx = step.get("paragraph_support_idx")
        support_key = None
        if isinstance(sidx, int) and sidx in by_idx:
            title, text = by_idx[sidx]
            support_key = index.find(title, [text], by_title=False)
        decomposition.append(
            SubQuestion(
                s.get_str("id", required=False) or str(j), s.get_str("question"), s.get_str("answer"), support_key
            )
        )
    qtype = type_of(r) or _musique_hops(qid)
    return Question(qid, r.get_str("question"), answer, aliases, tuple(gold), qtype, tuple(decomposition))


def _musique_hops(qid: str) -> str | None:
    m = re.match(r"^(?:musique_)?(\d+hop\d*)__", qid)
    return m[1] if m else None


def _context_texts(r: Record) -> dict[str, list[str]]:
    """title -> joined-text variants from a HotpotQA/2Wiki ``context`` ([[title, [sentences]], ...])."""
    out: dict[str, list[str]] = {}
    for j, item in enumerate(r.get_list("context", required=False)):
        if not (isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise r.error(f"context[{j}] must be [title, [sentences]]")
        sents = item[1]
        if isinstance(sents, str):
            sents = [sents]
        if not isinstance(sents, list) or not all(isinstance(s, str) for s in sents):
            raise r.error(f"context[{j}] sentences must be a list of strings")
        out.setdefault(item[0], []).extend(["".join(sents), " ".join(sents)])
    return out


def _supporting_titles(r: Record) -> list[str]:
    titles: list[str] = []
    for j, sf in enumerate(r.get_list("supporting_facts")):
        if not (isinstance(sf, list | tuple) and sf and isinstance(sf[0], str)):
            raise r.error(f"supporting_facts[{j}] must be [title, sentence_index]")
        if sf[0] not in titles:
            titles.append(sf[0])
    return titles


def _hotpot_question(r: Record, index: CorpusIndex, problems: list[str]) -> Question:
    """A raw HotpotQA / 2WikiMultiHopQA record: gold = the titles of ``supporting_facts``."""
    answer, aliases = _answer_and_aliases(r)
    ctx = _context_texts(r)
    gold: list[str] = []
    missing = []
    for title in _supporting_titles(r):
        key = index.find(title, ctx.get(title, []))
        if key is None:
            missing.append(title)
        elif key not in gold:
            gold.append(key)
    if missing:
        problems.append(f"{r.where}: supporting title(s) {missing} not found (or not unique) in the corpus; no gold")
        gold = []
    return Question(r.qid(), r.get_str("question"), answer, aliases, tuple(gold), type_of(r))


# --------------------------------------------------------------------------------------------------
# Dataset loaders


TWOWIKI_RAW_GLOBS = ("2wiki*.json", "2wiki*.jsonl", "dev.json", "train.json")
"""Raw 2WikiMultiHopQA question files (the release's ``dev.json``/``train.json``), read alone."""


def _load_2wiki(base: Path | None, qpath: Path | None, cpath: Path | None) -> Dataset:
    if qpath is None and base is not None and base.is_file():
        qpath = base
    if qpath is None:
        assert base is not None
        gold = next(
            (
                d / "questions_with_gold.json"
                for d in [base, base / "gold_1000"]
                if (d / "questions_with_gold.json").is_file()
            ),
            None,
        )
        if gold is not None:
            corpus = cpath or next(
                (c for d in candidate_dirs(base) for c in sorted(d.glob("2wikimultihopqa*_corpus.json"))), None
            )
            if corpus is None:
                raise InvalidInput(f"{base}: found {gold.name} but no 2wikimultihopqa*_corpus.json next to it")
            return load_gold_index_file(gold, corpus, name="2wikimultihopqa")
        pair = find_pair(base, "2wikimultihopqa")
        if pair is not None:
            qpath, cpath = pair[0], cpath or pair[1]
        else:
            qpath = find_raw(base, TWOWIKI_RAW_GLOBS)
        if qpath is None:
            raise InvalidInput(
                f"{base}: no 2WikiMultiHopQA files: expected gold_1000/questions_with_gold.json + "
                "hipporag_1000/2wikimultihopqa_corpus.json, or 2wikimultihopqa.json + 2wikimultihopqa_corpus.json, "
                f"or a raw file matching {' or '.join(TWOWIKI_RAW_GLOBS)}"
            )
    data = read_records(qpath)
    if isinstance(data[0], dict) and "gold_corpus_idx" in data[0]:
        if cpath is None:
            raise InvalidInput(f"{qpath}: gold_corpus_idx needs the corpus file it indexes")
        return load_gold_index_file(qpath, cpath, name="2wikimultihopqa")
    return load_hipporag(qpath, cpath, name="2wikimultihopqa")


def load_gold_index_file(questions: Path, corpus: Path, *, name: str) -> Dataset:
    """Questions with ``gold_corpus_idx`` (0-based positions in ``corpus``) and optional ``gold_titles``,
    as in ``2wikimultihopqa/gold_1000/questions_with_gold.json``."""
    docs = read_corpus(corpus)
    out = []
    for i, rec in enumerate(read_records(questions)):
        r = Record(questions, i, rec)
        idx = r.get_list("gold_corpus_idx")
        keys = []
        for j, n in enumerate(idx):
            if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < len(docs):
                raise r.error(f"gold_corpus_idx[{j}] = {n!r} is not a position in {corpus.name} (0..{len(docs) - 1})")
            keys.append(docs[n].key)
        titles = r.get_str_list("gold_titles")
        if titles and len(titles) == len(idx):
            for j, (n, t) in enumerate(zip(idx, titles, strict=True)):
                if docs[n].title != t.strip():
                    raise r.error(f"gold_titles[{j}] = {t!r} but passage {n} of {corpus.name} is {docs[n].title!r}")
        answer, aliases = _answer_and_aliases(r)
        out.append(Question(r.qid(), r.get_str("question"), answer, aliases, tuple(dict.fromkeys(keys)), type_of(r)))
    return Dataset(name, tuple(out), docs, (str(questions), str(corpus)))


def load_hipporag(questions: Path, corpus: Path | None, *, name: str) -> Dataset:
    """HippoRAG's question file (raw MuSiQue records with ``paragraphs``/``is_supporting``, or raw
    HotpotQA/2Wiki records with ``supporting_facts``/``context``) and its corpus of ``{title, text}``.

    Without a corpus file the corpus is the questions' own paragraphs, de-duplicated on (title, text).
    """
    data = read_records(questions)
    problems: list[str] = []
    dropped = 0
    out: list[Question] = []
    sources = [str(questions)]
    build = corpus is None
    if corpus is not None:
        index = CorpusIndex(read_corpus(corpus))
        sources.append(str(corpus))
    else:
        index = CorpusIndex()
    for i, rec in enumerate(data):
        r = Record(questions, i, rec)
        if r.has("paragraphs"):
            if r.rec.get("answerable") is False:
                dropped += 1
                continue
            q = _musique_question(r, index, build, problems)
        elif r.has("supporting_facts"):
            if build:
                for title, texts in _context_texts(r).items():
                    index.add(title, texts[0])
            q = _hotpot_question(r, index, problems)
        else:
            raise r.error("expected 'paragraphs' (MuSiQue) or 'supporting_facts' (HotpotQA/2Wiki)")
        out.append(q)
    docs = tuple(index.docs)
    if dropped:
        problems.append(f"{questions}: dropped {dropped} unanswerable record(s)")
    if not out:
        raise InvalidInput(f"{questions}: no answerable questions")
    return Dataset(name, tuple(out), docs, tuple(sources), tuple(problems))


def _load_hipporag_style(
    name: str, prefix: str, base: Path | None, qpath: Path | None, cpath: Path | None, *, raw_globs: Sequence[str]
) -> Dataset:
    if qpath is None:
        assert base is not None
        if base.is_file():
            qpath = base
        else:
            pair = find_pair(base, prefix)
            if pair is not None:
                qpath, cpath = pair[0], cpath or pair[1]
            else:
                qpath = find_raw(base, raw_globs)
                if qpath is None:
                    raise InvalidInput(
                        f"{base}: no {name} files: expected {prefix}*.json + {prefix}*_corpus.json (HippoRAG layout) "
                        f"or a raw file matching {' or '.join(raw_globs)}, here or in a subfolder"
                    )
    return load_hipporag(qpath, cpath, name=name)


def _load_linearrag(base: Path | None, qpath: Path | None, cpath: Path | None) -> Dataset:
    if qpath is None:
        assert base is not None
        qpath = base if base.is_file() else base / "questions.json"
    if cpath is None:
        cpath = qpath.with_name("chunks.json")
    if not qpath.is_file():
        raise InvalidInput(f"{qpath}: no such file (LinearRAG layout: questions.json + chunks.json)")
    if not cpath.is_file():
        raise InvalidInput(f"{cpath}: no such file; the LinearRAG format needs chunks.json next to questions.json")
    docs = read_corpus(cpath)
    out = []
    for i, rec in enumerate(read_records(qpath)):
        r = Record(qpath, i, rec)
        answer, aliases = _answer_and_aliases(r)
        out.append(Question(r.qid(), r.get_str("question"), answer, aliases, (), type_of(r)))
    return Dataset(
        "linearrag", tuple(out), docs, (str(qpath), str(cpath)), ("the LinearRAG format has no gold passages",)
    )


def load_wixqa(base: Path | None, *, splits: Sequence[str] = WIXQA_DEFAULT_SPLITS) -> Dataset:
    """WixQA exported from ``Wix/WixQA``: ``wixqa_<split>*.jsonl|json`` per split, ``wix_kb_corpus*``.

    Assumed fields (those of the Hugging Face configs): questions ``question``, ``answer``,
    ``article_ids`` (KB article ids); corpus ``id``, ``contents``, optional ``title`` and ``url`` (a
    missing title is taken from the URL's last path segment). Questions keep split order
    (ExpertWritten, then Simulated); the gold passages are the article ids. Parquet is not read:
    export with ``datasets.load_dataset(...).to_json(path)``.
    """
    if base is None or not base.is_dir():
        raise InvalidInput(f"wixqa: --data-dir must be a folder holding the exported WixQA files, got {base}")
    qfiles = []
    for split in splits:
        hits = sorted(p for p in base.glob(f"wixqa_{split}*") if p.suffix in (".jsonl", ".json"))
        if not hits:
            raise InvalidInput(f"{base}: no wixqa_{split}*.jsonl (or .json) file for the {split} split")
        if len(hits) > 1:
            raise InvalidInput(f"{base}: several files for the {split} split: {', '.join(p.name for p in hits)}")
        qfiles.append(hits[0])
    corpora = sorted(p for p in base.glob("wix_kb_corpus*") if p.suffix in (".jsonl", ".json"))
    if len(corpora) != 1:
        raise InvalidInput(f"{base}: expected one wix_kb_corpus*.jsonl (or .json) file, found {len(corpora)}")
    return _wixqa_from_files(qfiles, corpora[0])


def _wixqa_from_files(qfiles: Sequence[Path], corpus: Path | None) -> Dataset:
    if corpus is None:
        raise InvalidInput("wixqa: the knowledge-base corpus file (wix_kb_corpus) is required")
    docs = []
    for i, rec in enumerate(read_records(corpus)):
        r = Record(corpus, i, rec, "article")
        key = r.get_str("id", "_id", "key")
        title = r.get_str("title", required=False, allow_empty=True)
        if not title:
            url = r.get_str("url", required=False)
            title = url.rstrip("/").rsplit("/", 1)[-1].replace("-", " ") if url else ""
        docs.append(corpus_document(key, title, r.get_str("contents", "text")))
    keys = {d.key for d in docs}
    if len(keys) != len(docs):
        raise InvalidInput(f"{corpus}: duplicate article ids")
    problems: list[str] = []
    out = []
    for qf in qfiles:
        split = re.sub(r"^wixqa_", "", qf.stem).split("_")[0].split("-")[0] or qf.stem
        for i, rec in enumerate(read_records(qf)):
            r = Record(qf, i, rec)
            gold = r.get_str_list("article_ids")
            missing = [g for g in gold if g not in keys]
            if missing:
                problems.append(f"{r.where}: article id(s) {missing} not in {corpus.name}; no gold")
                gold = []
            qid = r.get_str("id", "_id", required=False) or f"{split}-{i}"
            out.append(Question(qid, r.get_str("question"), r.get_str("answer"), (), tuple(dict.fromkeys(gold)), split))
    return Dataset("wixqa", tuple(out), tuple(docs), (*map(str, qfiles), str(corpus)), tuple(problems))


def _load_generic(base: Path | None, qpath: Path | None, cpath: Path | None) -> Dataset:
    if qpath is None:
        assert base is not None
        qpath = base if base.is_file() else base / "questions.jsonl"
    if cpath is None:
        cpath = next(
            (qpath.with_name(n) for n in ("corpus.jsonl", "corpus.json") if qpath.with_name(n).is_file()), None
        )
    if cpath is None:
        raise InvalidInput(f"{qpath}: no corpus: put corpus.jsonl (or corpus.json) next to it, or pass the corpus file")
    return load_jsonl(qpath, cpath)


def load_jsonl(questions: Path, corpus: Path) -> Dataset:
    """The generic format: a questions file of objects and a corpus file (see the module docstring)."""
    docs = read_corpus(corpus)
    keys = {d.key for d in docs}
    index = CorpusIndex(docs)
    problems: list[str] = []
    out = []
    seen: set[str] = set()
    for i, rec in enumerate(read_records(questions)):
        r = Record(questions, i, rec)
        if r.has("answers"):
            answers = r.get_str_list("answers", required=True)
            if not answers:
                raise r.error("field 'answers' is empty")
            answer, aliases = answers[0], tuple(answers[1:])
        else:
            answer, aliases = _answer_and_aliases(r)
        gold = r.get_str_list("gold") or r.get_str_list("gold_keys")
        bad = [g for g in gold if g not in keys]
        if bad:
            raise r.error(f"gold key(s) {bad} not in {corpus.name}")
        if not gold and r.has("gold_titles"):
            titles = r.get_str_list("gold_titles")
            found = [index.find(t) for t in titles]
            if any(k is None for k in found):
                problems.append(f"{r.where}: gold title(s) not found (or not unique) in {corpus.name}; no gold")
            else:
                gold = [k for k in found if k is not None]
        qid = r.qid()
        if qid in seen:
            raise r.error(f"duplicate question id {qid!r}")
        seen.add(qid)
        out.append(Question(qid, r.get_str("question"), answer, aliases, tuple(dict.fromkeys(gold)), type_of(r)))
    return Dataset("jsonl", tuple(out), docs, (str(questions), str(corpus)), tuple(problems))
