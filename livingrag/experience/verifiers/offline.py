"""The offline verifier: claim support without NLI weights.

For each claim, the ``K_g`` evidence units nearest by embedding (appendix C's pre-filter) are
scored and the best one kept (eq. 15). A unit's support for an explanation claim is

    p = N * G * E * (0.55 * lex + 0.45 * sem)

* ``lex``: share of the claim's content words (stop words dropped, light stemming) in the unit;
* ``sem``: embedding cosine rescaled so 0.25 -> 0 and 0.75 -> 1 (clipped);
* ``E``: 1 when every named entity of the claim (capitalised spans) occurs in the unit, else half
  the share that does (one entity the evidence never names sinks the claim, as it would for NLI);
* ``N``: number and date agreement: 1 when every number of the claim occurs in the unit, 0 when a
  year of the claim is missing while the unit states another year (a contradiction), else 0.3;
* ``G``: 0.5 when the claim is negated ("not", "never", ...) and the unit is not, else 1.

An answer claim is supported by a unit that contains the answer, in proportion to how many of
the question's entities the used passages mention, and only fully when that unit states the
question's head relation: ``p = found * (0.4 + 0.6 * q_ent) * R``; a retrieved set that never
names the question's subject cannot ground its answer. ``R`` is 1 when the question has no
relation word or the unit states its head relation, else ``relation_miss`` (0.4). Relation words
are the question's words outside its entity names, question words and answer-type nouns such as
"place" or "nationality", stemmed, with common relation synonyms folded (born/birth, died/death,
wife/husband/spouse/married, director/directed, son/daughter/child, studied/educated/attended,
...); the head is the final verb of "Where was ... born?" / "When did ... die?" and the first
relation otherwise ("Who is the child of the performer of ...?"). "Friesland" found in a sentence
about provinces does not answer where a father died; "Reykjavik" in "shot in Reykjavik" does not
answer where a director was born.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from livingrag.experience.grounding import Claim, EvidenceUnit
from livingrag.experience.template import guess_mentions
from livingrag.experience.types import ClaimVerdict, UsedPassage
from livingrag.experience.verifiers.base import EvidenceSelector, TextEncoder

STOP_WORDS = frozenset(
    """a an the and or but if of to in on at by for with from as into onto about over under after before
    between during than then that this these those there here is are was were be been being am do does did
    has have had having it its it's he she they them his her their hers theirs him we us our you your i me my
    which who whom whose what when where why how also both either neither so such not no nor too very can could
    would should will shall may might must just only other another same s t answer question""".split()  # noqa: SIM905
)
NEGATIONS = frozenset({"not", "no", "never", "neither", "nor", "none", "without", "cannot", "n't"})
_WORD = re.compile(r"[0-9]+(?:[.,][0-9]+)*|[^\W\d_]+(?:['’][^\W\d_]+)*")
_NUM_WORDS = {
    "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7", "eight": "8",
    "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "twenty": "20", "thirty": "30", "forty": "40",
    "fifty": "50", "hundred": "100",
}  # fmt: skip


def stem(word: str) -> str:
    """A light suffix stripper so "films"/"film" and "directed"/"direct" meet."""
    w = word
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 5 and w.endswith("ing"):
        return w[:-3]
    if len(w) > 4 and w.endswith("ed"):
        return w[:-2]
    if len(w) > 4 and w.endswith("es") and w[-3] in "sxz":
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def words(text: str) -> list[str]:
    """Lower-cased word and number tokens; possessive 's dropped."""
    out = []
    for tok in _WORD.findall(text or ""):
        t = tok.lower().replace("’", "'")
        if t.endswith("'s"):
            t = t[:-2]
        if t.endswith("n't"):
            if t[:-3]:  # a bare "n't" (e.g. "didn 't" split by the text) has no stem
                out.append(t[:-3])
            t = "n't"
        if t:
            out.append(t)
    return out


def numbers(text: str) -> set[str]:
    """Numbers in ``text`` normalised ("1,000" -> "1000", "3rd" -> "3", "five" -> "5")."""
    out = set()
    for t in words(text):
        if t[0].isdigit():
            out.add(t.replace(",", "").rstrip("."))
        elif t in _NUM_WORDS:
            out.add(_NUM_WORDS[t])
    for m in re.finditer(r"\b(\d+)(?:st|nd|rd|th)\b", text or ""):
        out.add(m.group(1))
    return out


def years(nums: set[str]) -> set[str]:
    return {n for n in nums if len(n) == 4 and n.isdigit() and 1000 <= int(n) <= 2100}


def content_words(text: str) -> set[str]:
    """Stemmed content words (no stop words, no numbers)."""
    return {stem(t) for t in words(text) if t not in STOP_WORDS and not t[0].isdigit() and t not in NEGATIONS}


def entity_word_sets(text: str) -> list[set[str]]:
    """Each capitalised span of ``text`` as its set of stemmed content words."""
    spans = [content_words(m) for m in guess_mentions(text)]
    return [s for s in spans if s]


def is_negated(text: str) -> bool:
    return any(t in NEGATIONS for t in words(text))


def number_agreement(claim_nums: set[str], unit_nums: set[str]) -> float:
    """N of the module doc."""
    missing = claim_nums - unit_nums
    if not missing:
        return 1.0
    if years(missing) and years(unit_nums):
        return 0.0
    return 0.3


def rescale_similarity(cos: float, low: float = 0.25, high: float = 0.75) -> float:
    return float(min(max((cos - low) / (high - low), 0.0), 1.0))


def explanation_support(claim: str, unit: str, cosine: float) -> float:
    """p of the module doc for an explanation claim against one unit."""
    unit_words = content_words(unit)
    cw = content_words(claim)
    lex = len(cw & unit_words) / len(cw) if cw else 1.0
    ents = entity_word_sets(claim)
    found = sum(1 for e in ents if e <= unit_words) / len(ents) if ents else 1.0
    ent = 1.0 if found == 1.0 else 0.5 * found  # an entity the evidence never names is decisive
    num = number_agreement(numbers(claim), numbers(unit))
    neg = 0.5 if is_negated(claim) and not is_negated(unit) else 1.0
    return float(num * neg * ent * (0.55 * lex + 0.45 * rescale_similarity(cosine)))


def answer_found(answer: str, unit: str) -> bool:
    """Whether every content word and number of ``answer`` occurs in ``unit``."""
    aw, an = content_words(answer), numbers(answer)
    if not aw and not an:
        return False
    return aw <= content_words(unit) and an <= numbers(unit)


_RELATION_SYNONYMS = {
    "birth": "born", "birthplace": "born", "native": "born",
    "death": "die", "died": "die", "dies": "die", "dead": "die", "killed": "die", "assassinat": "die",
    "executed": "die", "buried": "burial", "burial": "burial",
    "wife": "spouse", "husband": "spouse", "married": "spouse", "marri": "spouse", "marry": "spouse",
    "widow": "spouse",
    "son": "child", "daughter": "child", "children": "child", "kid": "child",
    "father": "parent", "mother": "parent", "parent": "parent",
    "director": "direct", "directed": "direct", "direct": "direct", "filmmaker": "direct",
    "composer": "compos", "composed": "compos", "compos": "compos", "music": "compos", "score": "compos",
    "producer": "produc", "produced": "produc", "produc": "produc",
    "founder": "found", "founded": "found", "established": "found", "establish": "found", "co": "found",
    "studied": "study", "study": "study", "educated": "study", "educat": "study", "attended": "study",
    "attend": "study", "alumnu": "study", "graduated": "study", "graduat": "study",
    "performer": "perform", "performed": "perform", "singer": "perform", "sung": "perform", "sang": "perform",
    "recorded": "perform", "record": "perform", "band": "perform",
    "writer": "writ", "wrote": "writ", "written": "writ", "author": "writ",
    "released": "release", "release": "release", "premiered": "release", "published": "release",
    "publish": "release", "publisher": "release",
}  # fmt: skip
# answer-type and generic nouns: what the answer is, not how it relates to the subject
_NOT_RELATION = frozenset(
    """place city country nationality name year date time film movie song album book work person people
    first later earlier older younger last one same come came out both whose located location
    many much""".split()  # noqa: SIM905
)


def relation_key(word: str) -> str:
    """A stemmed content word with common relation synonyms folded together."""
    w = stem(word)
    return _RELATION_SYNONYMS.get(word, _RELATION_SYNONYMS.get(w, w))


def relation_words(question: str) -> list[str]:
    """The question's relation words in order (no repeats): content words outside its entity
    names, question words and answer-type nouns, as :func:`relation_key` folds them."""
    spans = entity_word_sets(question)
    entity_words = set().union(*spans) if spans else set()
    out: list[str] = []
    for t in words(question):
        if t in STOP_WORDS or t in NEGATIONS or t[0].isdigit() or t in _NOT_RELATION:
            continue
        if stem(t) in entity_words or stem(t) in _NOT_RELATION:
            continue
        key = relation_key(t)
        if key not in out:
            out.append(key)
    return out


_VERB_LAST = re.compile(r"^(where|when|why|how|in which|in what)\s+(did|do|does|was|were|is|are|has|had)\b", re.I)


_VERB_RELATIONS = frozenset(
    {
        "born",
        "die",
        "burial",
        "study",
        "found",
        "direct",
        "compos",
        "produc",
        "perform",
        "writ",
        "release",
        "spouse",
        "live",
        "work",
        "teach",
        "play",
    }
)


def head_relation(question: str) -> str | None:
    """The relation that links the answer to the rest: the last relation word of a "Where was ...
    born?" / "When did ... die?" question (its final verb), else the first ("Who is the child of
    the performer of ...?"); ``None`` when the question has none."""
    rel = relation_words(question)
    if not rel:
        return None
    toks = words(question)
    last = relation_key(toks[-1]) if toks else None
    if last in _VERB_RELATIONS and _VERB_LAST.match(" ".join((question or "").split())):
        return last
    return rel[0]


def relation_agreement(relation: str | None, unit: str) -> bool:
    """Whether ``unit`` states ``relation`` (True when there is none)."""
    if relation is None:
        return True
    return relation in {relation_key(t) for t in words(unit)}


def question_entity_coverage(question: str, passages_text: str) -> float:
    """Share of the question's entities (capitalised spans) whose words occur in the passages."""
    ents = entity_word_sets(question)
    if not ents:
        return 1.0
    have = content_words(passages_text)
    return sum(1 for e in ents if e <= have) / len(ents)


def answer_support(
    answer: str, unit: str, q_coverage: float, relation: str | None = None, relation_miss: float = 0.4
) -> float:
    """p of the module doc for an answer claim against one unit (``relation=None``: R = 1)."""
    if not answer_found(answer, unit):
        return 0.0
    r = 1.0 if relation_agreement(relation, unit) else relation_miss
    return (0.4 + 0.6 * q_coverage) * r


class OfflineVerifier:
    """Claim support from embeddings plus word, entity, number, date and negation agreement."""

    name = "offline"

    def __init__(self, *, encoder: TextEncoder, evidence_k: int, relation_miss: float | None = 0.4) -> None:
        """``relation_miss``: R for an answer unit that states none of the question's relations
        (``None``: the relation check is off, R = 1)."""
        self.selector = EvidenceSelector(encoder, evidence_k)
        self.relation_miss = relation_miss

    def verify(self, claims: Sequence[Claim], passages: Sequence[UsedPassage]) -> list[ClaimVerdict]:
        units, sims, top = self.selector.select(claims, passages)
        all_text = " ".join(f"{p.title} {p.text}" for p in passages)
        verdicts: list[ClaimVerdict] = []
        for i, (c, idx) in enumerate(zip(claims, top, strict=True)):
            if c.source == "answer" and c.answer:
                coverage = question_entity_coverage(c.question or "", all_text)
                rel = head_relation(c.question or "") if self.relation_miss is not None else None
                miss = self.relation_miss if self.relation_miss is not None else 1.0
                # the answer may sit in any unit, not only the K_g nearest to the claim's wording
                scored = [(answer_support(c.answer, u.text, coverage, rel, miss), j) for j, u in enumerate(units)]
            else:
                scored = [(explanation_support(c.text, units[j].text, float(sims[i, j])), j) for j in idx]
            verdicts.append(_best(c, scored, units))
        return verdicts


def _best(claim: Claim, scored: list[tuple[float, int]], units: list[EvidenceUnit]) -> ClaimVerdict:
    if not scored:
        return ClaimVerdict(claim=claim.text, source=claim.source, score=0.0)
    score, j = max(scored, key=lambda t: (t[0], -t[1]))
    u = units[j]
    return ClaimVerdict(
        claim=claim.text, source=claim.source, score=float(np.clip(score, 0.0, 1.0)), passage_id=u.passage_id,
        evidence=u.text,
    )  # fmt: skip
