"""The per-query record of an online stream run, and its JSON-lines and CSV forms.

The stream runner writes one :class:`QueryRecord` per (system, order, stream position); every table
and figure of the report is computed from these records alone (plus the dataset for Table 8), so a
run can be re-reported, merged or resumed from its files.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from livingrag.errors import InvalidInput

SYSTEM_LINEAR = "linear"
SYSTEM_LIVING = "living"
ABLATION_SYSTEMS: dict[str, str] = {
    "fusion": "living-no-fusion",
    "scaffold": "living-no-scaffold",
    "gate": "living-no-gate",
}
"""``--ablations`` component -> system name of LivingRAG without it (Table 5)."""

SYSTEM_LABELS: dict[str, str] = {
    SYSTEM_LINEAR: "LinearRAG",
    SYSTEM_LIVING: "LivingRAG",
    "living-no-fusion": "w/o Act. fusion",
    "living-no-scaffold": "w/o Scaffold",
    "living-no-gate": "w/o Quality Gate",
}

# Write-back decisions (section 3.5; NS is checked before GS, GS only when NS passed).
DECISION_STORED = "stored"
DECISION_REJECTED_NS = "rejected_ns"
DECISION_REJECTED_GS = "rejected_gs"
DECISION_ERROR = "error"
DECISIONS = (DECISION_STORED, DECISION_REJECTED_NS, DECISION_REJECTED_GS, DECISION_ERROR)


def system_label(system: str) -> str:
    return SYSTEM_LABELS.get(system, system)


@dataclass(frozen=True)
class QueryRecord:
    """One answered question of one system in one stream order.

    Identity: ``system`` (``linear``, ``living`` or an ablation), ``order`` (0 = dataset order),
    ``position`` (0-based place in that order's stream), ``question_id``.

    Answer: ``gold_answers`` (answer first, then aliases), ``prediction``, ``explanation`` (the
    model's reasoning text), ``contain_correct``/``em``/``f1``, ``llm_correct`` (None: not judged).

    Retrieval: ``gold_keys`` and ranked ``retrieved_keys`` (corpus keys of the dataset),
    ``all_gold_recall_at_2``/``all_gold_recall_at_5`` (1.0 when all gold passages are in the top k; None without gold).

    Cost and time: ``prompt_tokens``, ``completion_tokens`` (answer generation only; judge calls are
    not counted), ``cost_usd``, ``retrieval_s``, ``llm_s``, ``validation_s`` (None for LinearRAG).

    Reuse traces (Tables 1, 4, 16, 17): ``seed_entity_ids`` (query entities linked to the graph),
    ``context_entity_ids`` (final activation above the threshold), ``masked_question`` (the template
    T(q) of eq. 11), ``fused_experience_ids`` (the top-K experiences whose maps were fused: a
    positive weight, s_ret at or above the fusion floor), ``matched_experience_ids`` (the top-K
    selections of eq. 7 matching, fused or not; empty in records written before it existed),
    ``finding_experience_ids`` (the experiences stated in the prompt as findings, beyond the paper),
    ``reused_experience_id`` (a repeated question answered from that experience, no LLM call),
    ``scaffold_experience_id`` and ``scaffold_similarity`` (masked-template cosine between
    the question and the scaffold's source question), ``graph_transfer`` (fusion added new
    above-threshold entities; None for LinearRAG).

    Write-back (Table 6, figures 3 and 9): ``writeback`` (one of :data:`DECISIONS`, None when the
    system writes nothing), ``novelty`` (NS), ``grounding`` (GS; None when GS did not run),
    ``stored_experience_id``, ``store_size_after`` (after the question's feedback, if any).

    Feedback (``--feedback-rate``; :mod:`livingrag.evaluation.feedback`): ``feedback`` (the simulated
    verdict, right or wrong; None when the answer got none), ``feedback_correction`` (the wrong verdict
    came with the first gold answer as the corrected answer; None without feedback),
    ``correction_experience_id`` (the experience holding that correction), ``reused_wrong`` (the answer
    was served from memory, ``reused_experience_id``, and is not Contain-correct; None when it was not
    served from memory). ``extra["feedback"]`` keeps the experiences the verdict verified and retracted,
    ``extra["feedback_error"]`` why a drawn answer got no verdict.

    ``error``: why the query failed, if it did.
    """

    system: str
    order: int
    position: int
    question_id: str
    question: str
    gold_answers: tuple[str, ...] = ()
    prediction: str = ""
    explanation: str = ""
    contain_correct: bool = False
    em: bool = False
    f1: float = 0.0
    llm_correct: bool | None = None
    gold_keys: tuple[str, ...] = ()
    retrieved_keys: tuple[str, ...] = ()
    all_gold_recall_at_2: float | None = None
    all_gold_recall_at_5: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    retrieval_s: float | None = None
    llm_s: float | None = None
    validation_s: float | None = None
    seed_entity_ids: tuple[int, ...] = ()
    context_entity_ids: tuple[int, ...] = ()
    masked_question: str = ""
    fused_experience_ids: tuple[int, ...] = ()
    matched_experience_ids: tuple[int, ...] = ()
    finding_experience_ids: tuple[int, ...] = ()
    reused_experience_id: int | None = None
    scaffold_experience_id: int | None = None
    scaffold_similarity: float | None = None
    graph_transfer: bool | None = None
    writeback: str | None = None
    novelty: float | None = None
    grounding: float | None = None
    stored_experience_id: int | None = None
    store_size_after: int | None = None
    feedback: str | None = None
    feedback_correction: bool | None = None
    correction_experience_id: int | None = None
    reused_wrong: bool | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.writeback is not None and self.writeback not in DECISIONS:
            raise InvalidInput(f"record {self.key}: writeback must be one of {DECISIONS}, got {self.writeback!r}")

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.system, self.order, self.position)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, where: str = "record") -> QueryRecord:
        d = {_RENAMED.get(k, k): v for k, v in d.items()}
        unknown = d.keys() - _KINDS.keys()
        if unknown:
            raise InvalidInput(f"{where}: unknown field(s) {sorted(unknown)}")
        vals: dict[str, Any] = {}
        for name, value in d.items():
            try:
                vals[name] = _coerce(_KINDS[name], value)
            except (TypeError, ValueError) as exc:
                raise InvalidInput(f"{where}: field {name!r}: {exc}") from None
        missing = {"system", "order", "position", "question_id", "question"} - vals.keys()
        if missing:
            raise InvalidInput(f"{where}: missing field(s) {sorted(missing)}")
        return cls(**vals)


_RENAMED = {"recall_at_2": "all_gold_recall_at_2", "recall_at_5": "all_gold_recall_at_5"}
"""Fields of records written before the rename (``recall_at_k`` meant all-gold here and per-passage in
the retrieval benchmark; now ``all_gold_recall_at_k`` and ``passage_recall_at_k`` everywhere)."""

# Field kinds drive JSON/CSV coercion.
_KIND_OF_TYPE = {
    "str": "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "bool | None": "bool?",
    "float | None": "float?",
    "int | None": "int?",
    "str | None": "str?",
    "tuple[str, ...]": "strs",
    "tuple[int, ...]": "ints",
    "dict[str, Any]": "dict",
}
_KINDS: dict[str, str] = {f.name: _KIND_OF_TYPE[str(f.type)] for f in fields(QueryRecord)}
CSV_COLUMNS: tuple[str, ...] = tuple(_KINDS)


def _coerce(kind: str, v: Any) -> Any:
    if kind.endswith("?"):
        if v is None or v == "":
            return None
        kind = kind[:-1]
    if kind == "str":
        if not isinstance(v, str):
            raise TypeError(f"expected a string, got {type(v).__name__}")
        return v
    if kind == "int":
        if isinstance(v, bool) or (isinstance(v, float) and not v.is_integer()):
            raise TypeError(f"expected an integer, got {v!r}")
        return int(v)
    if kind == "float":
        if isinstance(v, bool):
            raise TypeError(f"expected a number, got {v!r}")
        f = float(v)
        if math.isnan(f):
            raise ValueError("NaN is not allowed")
        return f
    if kind == "bool":
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.lower() in ("true", "false", "1", "0"):
            return v.lower() in ("true", "1")
        if isinstance(v, int) and v in (0, 1):
            return bool(v)
        raise TypeError(f"expected true/false, got {v!r}")
    if kind in ("strs", "ints", "dict"):
        if isinstance(v, str):
            v = json.loads(v) if v else ([] if kind != "dict" else {})
        if kind == "dict":
            if not isinstance(v, dict):
                raise TypeError(f"expected an object, got {type(v).__name__}")
            return v
        if not isinstance(v, list | tuple):
            raise TypeError(f"expected a list, got {type(v).__name__}")
        return tuple(_coerce("str" if kind == "strs" else "int", x) for x in v)
    raise AssertionError(kind)


# --------------------------------------------------------------------------------------------------
# Files


def write_records_jsonl(path: str | Path, records: Iterable[QueryRecord]) -> None:
    """Write records as JSON lines (one object per record, fields in declaration order)."""
    with Path(path).open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")


def append_record(path: str | Path, record: QueryRecord) -> None:
    """Append one record and flush, so an interrupted run keeps every finished query."""
    with Path(path).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
        fh.flush()


def read_records_jsonl(path: str | Path, *, allow_truncated_tail: bool = False) -> list[QueryRecord]:
    """Read JSON-lines records; errors name the file and line. ``allow_truncated_tail`` drops a
    half-written last line (what a killed run leaves) instead of failing."""
    p = Path(path)
    if not p.is_file():
        raise InvalidInput(f"{p}: no such file")
    lines = p.read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as exc:
            if allow_truncated_tail and i == len(lines):
                break
            raise InvalidInput(f"{p}: line {i}: not valid JSON: {exc.msg}") from None
        if not isinstance(d, dict):
            raise InvalidInput(f"{p}: line {i}: expected an object")
        out.append(QueryRecord.from_dict(d, where=f"{p}: line {i}"))
    return out


def _csv_cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | tuple | dict):
        return json.dumps(list(v) if isinstance(v, tuple) else v, ensure_ascii=False)
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_records_csv(path: str | Path, records: Iterable[QueryRecord]) -> None:
    """The per-query CSV: one row per record, lists as JSON text, None as an empty cell."""
    with Path(path).open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for r in records:
            d = r.to_dict()
            w.writerow([_csv_cell(d[c]) for c in CSV_COLUMNS])


def read_records_csv(path: str | Path) -> list[QueryRecord]:
    """Read the per-query CSV back (the inverse of :func:`write_records_csv`)."""
    p = Path(path)
    if not p.is_file():
        raise InvalidInput(f"{p}: no such file")
    with p.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        out = []
        for i, row in enumerate(reader, 2):
            d: dict[str, Any] = {}
            for k, v in row.items():
                if k is None:
                    raise InvalidInput(f"{p}: line {i}: more cells than columns")
                keep_empty = _KINDS.get(k) == "str"  # a plain string field may be legitimately empty
                if v is not None and (v != "" or keep_empty):
                    d[k] = v
            out.append(QueryRecord.from_dict(d, where=f"{p}: line {i}"))
    return out


def by_system_and_order(records: Iterable[QueryRecord]) -> dict[tuple[str, int], list[QueryRecord]]:
    """Group records into runs keyed (system, order), each sorted by stream position."""
    out: dict[tuple[str, int], list[QueryRecord]] = {}
    for r in records:
        out.setdefault((r.system, r.order), []).append(r)
    for run in out.values():
        run.sort(key=lambda r: r.position)
    return dict(sorted(out.items(), key=lambda kv: (_system_rank(kv[0][0]), kv[0][1])))


def _system_rank(system: str) -> tuple[int, str]:
    order = [SYSTEM_LINEAR, SYSTEM_LIVING, *ABLATION_SYSTEMS.values()]
    return (order.index(system) if system in order else len(order), system)
