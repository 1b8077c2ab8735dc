"""``livingrag experience`` and ``livingrag feedback``: memory people can trust and correct.

``experience show`` tells where an experience came from (origin), who vouches for it (trust), what
it is used for and whether it is used at all (state); ``verify``, ``retract`` and ``delete`` change
that, and ``history`` lists what happened to it. ``feedback`` gives a verdict on an answered
question (the query id ``livingrag ask`` prints): ``--wrong`` retracts the experiences that give
that answer and remembers it as wrong, ``--right`` verifies the question's experience, and
``--wrong --answer`` also stores the person's answer as a verified experience. The command line
acts as ``operator`` in every experience's history.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from livingrag.cli.common import (
    console,
    err_console,
    examples,
    experience_state,
    id_argument,
    json_option,
    load_settings,
    open_database,
    print_json,
    resolve_tenant,
    tenant_option,
    when,
)
from livingrag.experience.trust import Actor

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.db.engine import Database
    from livingrag.experience.feedback import FeedbackOutcome, TrustService

app = typer.Typer(
    help="One experience: where it came from, who vouches for it, what it is used for; verify, retract or "
    "delete it and read its history. Verdicts on answers: `livingrag feedback`."
    + examples("livingrag experience show 42", "livingrag experience history 42 --tenant acme"),
    no_args_is_help=True,
)

EXPERIENCE_ID = id_argument("Experience id (`livingrag admin list` lists them).")
JSON = json_option()

GS_LABEL = "heuristic GS"
"""The gate score of eq. 16 as the commands name it: a heuristic, not the probability that the
answer is right (with the offline models its ROC AUC is 0.54-0.68)."""


def _trust_service(db: Database, settings: Settings) -> TrustService:
    """The trust service over ``db`` (its store loads no model until a correction is checked)."""
    from livingrag.experience.feedback import TrustService
    from livingrag.experience.store import ExperienceStore

    return TrustService(db, settings, ExperienceStore(db, settings))


def _operator() -> Actor:
    """Who the command line is in the history (``operator``)."""
    return Actor.operator()


def _support(origin: str, grounding: dict[str, Any]) -> str:
    """How the answer is backed: a person's correction is ``grounded`` (a passage supports it) or
    ``asserted`` (none does); the gate's answers passed the grounding gate; the rest say so."""
    if grounding.get("asserted_by"):
        why = "not checked against the passages" if grounding.get("gs") is None else "no passage supports it"
        return f"asserted by {grounding['asserted_by']}: {why}"
    if grounding.get("grounded") is True:
        return "grounded: the passages support it"
    if grounding.get("vouched_by"):
        return f"vouched for by {grounding['vouched_by']} (the gates had not stored it)"
    if origin == "ungated":
        return "not checked (stored with the gates off)"
    return "passed the grounding gate"


def experience_details(db: Database, tenant_id: int, experience_id: int, now: datetime) -> dict[str, Any]:
    """What ``experience show`` shows of one experience, JSON-ready but for timestamps."""
    from livingrag.services import experiences

    details = experiences.experience_details(db, tenant_id, experience_id)
    rec, d, present, changed = details.record, details.detail, details.passages, details.changed_passage_ids
    g = d.grounding
    return {
        "id": rec.id,
        "corpus_id": rec.corpus_id,
        "question": rec.query,
        "answer": rec.answer,
        "summary": d.summary,
        "state": experience_state(rec, now),
        "stale_reason": rec.stale_reason,
        "origin": rec.origin,
        "origin_detail": rec.origin_detail,
        "gated": rec.gated,
        "trust": rec.trust,
        "trust_actor": rec.trust_actor,
        "trust_at": rec.trust_at,
        "trust_reason": rec.trust_reason,
        "gs": g.get("gs", rec.confidence),
        "verifier": g.get("verifier"),
        "support": _support(rec.origin, g),
        "uses": {"fusion": rec.fusion_uses, "scaffold": rec.scaffold_uses, "answer": rec.answer_uses},
        "last_used_at": rec.last_used_at,
        "created_at": rec.created_at,
        "expires_at": rec.expires_at,
        "corpus_version": d.corpus_version,
        "source_passages": [
            {
                "id": pid,
                "title": present[pid][0] if pid in present else None,
                "exists": pid in present,
                "changed": pid not in present or pid in changed,
            }
            for pid in d.source_passage_ids
        ],
        "grounding": g,
    }


@app.command(
    help="Show one experience: question and answer, origin (gate, judge, person, ungated) and its detail, trust "
    f"(unverified, verified, retracted) with who set it, when and why, the {GS_LABEL} (the grounding gate's "
    "score, not a confidence), uses (fusion, scaffold, answer), state (active, stale, retracted, expired) and "
    "the source passages. Read-only."
    + examples("livingrag experience show 42", "livingrag experience show 42 --tenant acme --json"),
)
def show(experience_id: int = EXPERIENCE_ID, tenant: str = tenant_option(), as_json: bool = JSON) -> None:
    now = datetime.now(UTC)
    with open_database() as db:
        out = experience_details(db, resolve_tenant(db, tenant), experience_id, now)
    if as_json:
        print_json(out)
        return
    gs = out["gs"]
    trust = out["trust"]
    if out["trust_actor"]:
        trust += f" by {out['trust_actor']} at {when(out['trust_at'])}"
        trust += f": {out['trust_reason']}" if out["trust_reason"] else ""
    state = out["state"] + (f" ({out['stale_reason']})" if out["state"] == "stale" and out["stale_reason"] else "")
    uses = out["uses"]
    rows = [
        ("question", out["question"]),
        ("answer", out["answer"]),
        ("state", state),
        ("origin", out["origin"] + (f" ({out['origin_detail']})" if out["origin_detail"] else "")),
        ("trust", trust),
        ("support", out["support"]),
        (
            GS_LABEL,
            "-" if gs is None else f"{float(gs):.3f}" + (f" (verifier {out['verifier']})" if out["verifier"] else ""),
        ),
        ("uses", f"fusion {uses['fusion']}, scaffold {uses['scaffold']}, answer {uses['answer']}"),
        ("last used", when(out["last_used_at"])),
        ("created", when(out["created_at"])),
        ("expires", when(out["expires_at"])),
        ("corpus", f"{out['corpus_id']} (version {out['corpus_version']})"),
    ]
    table = Table("field", "value", title=f"experience {out['id']}")
    for field, value in rows:
        table.add_row(field, str(value))
    console.print(table)
    passages = Table("passage", "title", "now", title="source passages")
    for p in out["source_passages"]:
        status = "deleted" if not p["exists"] else ("changed" if p["changed"] else "as cited")
        passages.add_row(str(p["id"]), p["title"] or "-", status)
    console.print(passages)


def _set_trust(trust: str, experience_id: int, tenant: str, reason: str | None, as_json: bool) -> None:
    """Verify or retract one experience as the operator and print what changed."""
    settings = load_settings()
    with open_database(settings) as db:
        tid = resolve_tenant(db, tenant)
        svc = _trust_service(db, settings)
        change = (svc.verify if trust == "verified" else svc.retract)(
            tid, experience_id, actor=_operator(), reason=reason
        )
    if as_json:
        print_json(asdict(change))
    elif change.changed:
        console.print(f"experience {change.experience_id} {change.trust} (was {change.previous}) by {change.actor}")
    else:
        console.print(f"experience {change.experience_id} was {change.trust} already; nothing changed")


@app.command(
    help="Verify an experience: a person vouches for its answer, so it may be given again for the same "
    "question without an LLM call (experience.reuse_answers_from: verified, or auto_verified, the default). "
    "A retracted one "
    "becomes verified again and its answer is no longer remembered as wrong."
    + examples("livingrag experience verify 42", 'livingrag experience verify 42 --reason "checked the source"'),
)
def verify(
    experience_id: int = EXPERIENCE_ID,
    tenant: str = tenant_option(),
    reason: str | None = typer.Option(None, "--reason", help="Why (kept in the history)."),
    as_json: bool = JSON,
) -> None:
    _set_trust("verified", experience_id, tenant, reason, as_json)


@app.command(
    help="Retract an experience: it is never used again (fusion, scaffold, answer reuse) and its answer is "
    "remembered as wrong for its question, so the gates do not store it again. It stays listed, with the "
    "reason; `livingrag experience verify` undoes it."
    + examples('livingrag experience retract 42 --reason "the director was born in Brevik"'),
)
def retract(
    experience_id: int = EXPERIENCE_ID,
    tenant: str = tenant_option(),
    reason: str = typer.Option(..., "--reason", help="Why it is wrong (required; kept in the history)."),
    as_json: bool = JSON,
) -> None:
    from livingrag.errors import InvalidInput

    if not reason.strip():
        raise InvalidInput("--reason must say why the experience is wrong")
    _set_trust("retracted", experience_id, tenant, reason, as_json)


@app.command(
    help="Delete an experience (its history stays, ending with a 'deleted' event). To keep it listed but "
    "never used, retract it instead."
    + examples("livingrag experience delete 42 --yes", 'livingrag experience delete 42 --reason "duplicate" --yes'),
)
def delete(
    experience_id: int = EXPERIENCE_ID,
    tenant: str = tenant_option(),
    reason: str | None = typer.Option(None, "--reason", help="Why (kept in the history)."),
    yes: bool = typer.Option(False, "--yes", help="Do not ask for confirmation."),
) -> None:
    from livingrag.services import experiences

    with open_database() as db:
        tid = resolve_tenant(db, tenant)
        rec = experiences.get_experience(db, tid, experience_id)
        if not yes and not typer.confirm(f"Delete experience {rec.id} ({rec.query!r} -> {rec.answer!r})?"):
            raise typer.Exit(1)
        experiences.delete_experience(db, tid, rec.id, actor=_operator(), reason=reason)
    console.print(f"deleted experience {rec.id}")


@app.command(
    help="The history of an experience, oldest first: created, used (fusion, scaffold, finding, answer), verified, "
    "retracted, corrected, stale, expired, deleted; with the time, who did it and why. A deleted experience "
    "keeps its history." + examples("livingrag experience history 42", "livingrag experience history 42 --json"),
)
def history(
    experience_id: int = EXPERIENCE_ID,
    tenant: str = tenant_option(),
    limit: int = typer.Option(1000, "--limit", min=1, max=10_000, help="At most this many events (the newest)."),
    as_json: bool = JSON,
) -> None:
    settings = load_settings()
    with open_database(settings) as db:
        tid = resolve_tenant(db, tenant)
        events = _trust_service(db, settings).history(tid, experience_id, limit=limit)
    if as_json:
        print_json([asdict(e) for e in events])
        return
    table = Table("time", "event", "actor", "query", "reason", title=f"experience {experience_id}")
    for e in events:
        table.add_row(
            when(e.created_at), e.event, e.actor, "-" if e.query_log_id is None else str(e.query_log_id),
            e.reason or "-",
        )  # fmt: skip
    console.print(table)


# ---------------------------------------------------------------- livingrag feedback

FEEDBACK_HELP = (
    "Say whether the answer to a question was right (the query id `livingrag ask` prints). --wrong retracts "
    "every active experience that gives this answer to this question and remembers it as wrong (never served "
    "or stored for it again); with --answer the right answer is stored as a verified experience of origin "
    "person, checked against the question's passages by the configured verifier: grounded when they support "
    "it, else kept as asserted by you. --right verifies the question's experience (storing the answer now if "
    "the gates had rejected it). Giving the same verdict again changes nothing."
    + examples(
        "livingrag feedback 123 --right",
        'livingrag feedback 123 --wrong --answer "Brevik" --note "Marta Quell was born in Brevik"',
        "livingrag feedback 123 --wrong --tenant acme --json",
    )
)


def _give_feedback(
    svc: TrustService, tenant_id: int, query_id: int, verdict: str, *, wait: float, quiet: bool, **kw: Any
) -> FeedbackOutcome:
    """The verdict, retried for up to ``wait`` seconds while the question's write-back is pending."""
    from livingrag.errors import Conflict, QuotaExceeded

    deadline = time.monotonic() + wait
    told = False
    while True:
        try:
            return svc.feedback(tenant_id, query_id, verdict, actor=_operator(), **kw)
        except Conflict as exc:
            left = deadline - time.monotonic()
            if isinstance(exc, QuotaExceeded) or left <= 0:
                if wait > 0 and not isinstance(exc, QuotaExceeded):
                    raise Conflict(f"{exc} (waited {wait:g} s; --wait waits longer)") from exc
                raise
            if not told and not quiet:
                err_console.print(f"[dim]the write-back of question {query_id} is pending; waiting...[/dim]")
                told = True
            time.sleep(min(0.25, left))


def _ids(ids: tuple[int, ...]) -> str:
    return ", ".join(map(str, ids)) or "-"


def feedback(
    query_id: int = id_argument("The query id `livingrag ask` printed (`query 123`)."),
    tenant: str = tenant_option(),
    right: bool = typer.Option(False, "--right", help="The answer was right."),
    wrong: bool = typer.Option(False, "--wrong", help="The answer was wrong."),
    answer: str | None = typer.Option(None, "--answer", help="With --wrong: the right answer, stored as verified."),
    note: str | None = typer.Option(None, "--note", help="Why (kept with the verdict; with --answer, its reason)."),
    wait: float = typer.Option(
        10.0, "--wait", min=0, help="Seconds to keep trying while the question's write-back is still pending."
    ),
    as_json: bool = JSON,
) -> None:
    from livingrag.errors import InvalidInput

    if right == wrong:
        raise InvalidInput("give exactly one of --right and --wrong")
    verdict = "right" if right else "wrong"
    settings = load_settings()
    with open_database(settings) as db:
        tid = resolve_tenant(db, tenant)
        svc = _trust_service(db, settings)
        out = _give_feedback(svc, tid, query_id, verdict, wait=wait, quiet=as_json, answer=answer, note=note)
    if as_json:
        print_json(out.as_dict())
        return
    console.print(
        f"question {out.query_log_id} marked [bold]{out.verdict}[/bold] by {out.actor} (feedback {out.feedback_id})"
    )
    for message in out.messages:
        console.print(f"  - {message}")
    if not out.repeated:
        console.print(
            f"retracted: {_ids(out.retracted_ids)}; verified: {_ids(out.verified_ids)}; "
            f"stored: {out.stored_experience_id or '-'}"
        )
    check = out.check
    if check is not None:
        if check.gs is None:
            console.print(f"correction: asserted (not checked against the passages: verifier {check.verifier})")
        else:
            support = "grounded (the passages support it)" if check.grounded else "asserted (no passage supports it)"
            console.print(f"correction: {support}; {GS_LABEL} {check.gs:.3f} by verifier {check.verifier}")
