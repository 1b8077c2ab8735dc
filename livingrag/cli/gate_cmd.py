"""``livingrag gate``: a tenant's learned gate (docs/learned-gate.md).

``report`` shows what people's verdicts taught it: the labels, each calibrator's time-ordered
held-out AUC, the store and serve thresholds with their held-out precision and recall, the feature
weights, when it was fitted and whether it decides; ``fit`` refits now; ``reset`` drops the
calibrators (the fixed gate decides again, auto-verified experiences go back to unverified).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from livingrag.cli.common import (
    console,
    examples,
    json_option,
    load_settings,
    open_database,
    print_json,
    resolve_tenant,
    tenant_option,
)

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.db.engine import Database
    from livingrag.experience.gate_learning import GateLearner

app = typer.Typer(
    help="The tenant's learned gate: labels from people's verdicts, calibrators validated in time order, "
    "and whether one decides the write gate."
    + examples("livingrag gate report --tenant acme", "livingrag gate reset --tenant acme --yes"),
    no_args_is_help=True,
)

JSON = json_option()


def _learner(db: Database, settings: Settings) -> GateLearner:
    from livingrag.experience.gate_learning import GateLearner

    return GateLearner(db, settings)


def _fmt(v: Any, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


@app.command(
    help="Labels, the current calibrators (held-out AUC, thresholds with their held-out precision and recall, "
    "feature weights), the last fits and how write-backs were decided."
    + examples("livingrag gate report --tenant acme", "livingrag gate report --tenant acme --json")
)
def report(
    tenant: str = tenant_option(),
    history: int = typer.Option(10, "--history", min=0, max=100, help="Past fits to list."),
    as_json: bool = JSON,
) -> None:
    """Labels, the current calibrators (held-out AUC, thresholds, weights), fits and decisions."""
    settings = load_settings()
    with open_database(settings) as db:
        tid = resolve_tenant(db, tenant)
        rep = _learner(db, settings).report(tid, history=history)
    if as_json:
        print_json(rep)
        return
    s, lab = rep["settings"], rep["labels"]
    console.print(
        f"tenant {tid}: learning {'on' if rep['learning'] else 'off'}; {lab['total']} labels ({lab['right']} right); "
        f"a fit needs {s['learn_min_labels']}, deciding needs held-out AUC >= {s['learn_min_auc']} and precision "
        f"{s['store_min_precision']} to store, {s['serve_min_precision']} to serve; "
        f"{rep['auto_verified_experiences']} auto-verified experience(s)"
    )
    for c, v in lab["per_corpus"].items():
        console.print(f"  corpus {c}: {v['labels']} labels, {v['right']} right")
    if not rep["models"]:
        console.print("no calibrator yet: the fixed gate decides (NS, the answer form, GS >= tau_gs).")
    for m in rep["models"]:
        h = m["held_out"]
        console.print(
            f"\n[bold]{m['scope']}{'' if m['corpus_id'] is None else ' ' + str(m['corpus_id'])} v{m['version']}[/bold]"
            f" ({m['labels']} labels, fitted {m['fitted_at']}): "
            + ("[green]decides the write gate[/green]" if m["deciding"] else "watches (the fixed gate decides)")
            + f" — {h.get('why')}"
        )
        console.print(
            f"  held out: {h.get('held_out')} labels, AUC {_fmt(h.get('auc'))}; store at p >= "
            f"{_fmt(m['store_threshold'])} (precision {_fmt(h.get('store_precision'))}, recall "
            f"{_fmt(h.get('store_recall'))}); serve at p >= {_fmt(m['serve_threshold'])} (precision "
            f"{_fmt(h.get('serve_precision'))}, recall {_fmt(h.get('serve_recall'))})"
        )
        if m.get("weights"):
            t = Table("feature", "weight (standardised)")
            for f, w in sorted(m["weights"].items(), key=lambda kv: -abs(kv[1])):
                t.add_row(f, f"{w:+.3f}")
            console.print(t)
    if rep["decisions"]:
        t = Table("gate", "decision", "write-backs", title="write-back decisions")
        for d in rep["decisions"]:
            t.add_row(d["gate"], d["decision"], str(d["count"]))
        console.print(t)
    if rep["history"]:
        t = Table("id", "scope", "version", "labels", "AUC", "earned", "fitted", "retired", title="fits")
        for m in rep["history"]:
            t.add_row(
                str(m["id"]), m["scope"] + ("" if m["corpus_id"] is None else f" {m['corpus_id']}"),
                str(m["version"]), str(m["labels"]), _fmt(m["held_out"].get("auc")), str(m["earned"]),
                m["fitted_at"], m["retired_why"] or "-",
            )  # fmt: skip
        console.print(t)


@app.command(
    help="Refit every scope of the tenant that has enough labels now (fits also follow verdicts by themselves)."
    + examples("livingrag gate fit --tenant acme")
)
def fit(tenant: str = tenant_option(), as_json: bool = JSON) -> None:
    """Refit every scope of the tenant that has enough labels now (fits also follow verdicts)."""
    settings = load_settings()
    with open_database(settings) as db:
        tid = resolve_tenant(db, tenant)
        rows = _learner(db, settings).refit(tid, force=True)
    out = [
        {"id": r.id, "corpus_id": r.corpus_id, "version": r.version, "labels": r.labels, "earned": r.earned}
        | {"auc": r.metrics.get("auc"), "why": r.metrics.get("why")}
        for r in rows
    ]
    if as_json:
        print_json(out)
        return
    if not out:
        console.print(f"nothing fitted: no scope has gates.learn_min_labels = {settings.gates.learn_min_labels} labels")
    for o in out:
        scope = "tenant" if o["corpus_id"] is None else f"corpus {o['corpus_id']}"
        console.print(f"{scope} v{o['version']}: {o['labels']} labels, held-out AUC {_fmt(o['auc'])} — {o['why']}")


@app.command(
    help="Drop the tenant's calibrators: the fixed gate decides again and auto-verified experiences go back to "
    "unverified (their history says so). The labels stay unless --forget-labels."
    + examples("livingrag gate reset --tenant acme --yes", "livingrag gate reset --tenant acme --corpus 3 --yes")
)
def reset(
    tenant: str = tenant_option(),
    corpus: int | None = typer.Option(None, "--corpus", min=1, help="Only this corpus's calibrator."),
    forget_labels: bool = typer.Option(False, "--forget-labels", help="Also delete the labels."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
    as_json: bool = JSON,
) -> None:
    """Drop the tenant's calibrators: the fixed gate decides again, auto-verified experiences are demoted."""
    settings = load_settings()
    if not yes and not typer.confirm(f"Reset the learned gate of tenant {tenant!r}?"):
        raise typer.Exit(1)
    with open_database(settings) as db:
        tid = resolve_tenant(db, tenant)
        if corpus is not None:
            from livingrag.corpus.service import get_corpus

            get_corpus(db, tid, corpus)  # NotFound for another tenant's or a missing corpus
        out = _learner(db, settings).reset(tid, corpus_id=corpus, forget_labels=forget_labels)
    if as_json:
        print_json(out)
        return
    console.print(
        f"reset: {out['models_retired']} calibrator(s) retired, {out['experiences_demoted']} experience(s) demoted, "
        f"{out['labels_deleted']} label(s) deleted"
    )
