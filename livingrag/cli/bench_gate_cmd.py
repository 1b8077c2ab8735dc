"""``livingrag bench gate-learn``: the learned gate replayed over kept ``eval stream`` runs
(:mod:`livingrag.bench.gate_learn_replay`)."""

from __future__ import annotations

from pathlib import Path

import typer

from livingrag.cli.common import console, examples, load_settings, print_json

HELP = (
    "Replay the learned gate (gates.learn) over the answers of kept `eval stream` runs, as one tenant's stream, "
    "without a database or an LLM: every answer past the novelty gate gets the write-back's features, a share R "
    "of them (drawn as `eval stream --feedback-rate R` draws) becomes a label once answered, the calibrator refits "
    "as the live learner does and, once it has earned it, decides. Prints, over the positions from --from on, the "
    "online AUC of its P(right) (each from a model of earlier labels), the precision of what it stores against what "
    "the live fixed gate stored on the same answers (paired bootstrap interval), and how many stored answers it "
    "would auto-verify and how many of those are wrong."
    + examples(
        "livingrag bench gate-learn --run benchmarks/results/2wiki-300-offline/records.jsonl:2wikimultihopqa:"
        "../shared/datasets/2wikimultihopqa --run benchmarks/results/2wiki-301-600-offline-2026-12-05/records.jsonl:"
        "2wikimultihopqa:../shared/datasets/2wikimultihopqa --feedback-rate 0.3 --from 300",
    )
)


def gate_learn(
    run: list[str] = typer.Option(
        ..., "--run", help="RECORDS.jsonl:DATASET:DATA_DIR of a kept run (repeat: one stream, in order)."
    ),
    feedback_rate: float = typer.Option(0.3, "--feedback-rate", min=0.0, max=1.0, help="Share of answers labelled."),
    seed: int = typer.Option(0, "--feedback-seed", help="Seed of the feedback draw (as eval stream's)."),
    start: int = typer.Option(0, "--from", min=0, help="Report over stream positions >= this (0-based)."),
    system: str = typer.Option("living", "--system", help="Whose answers to replay."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    from livingrag.bench.gate_learn_replay import RunSpec, format_report, replay, summarize
    from livingrag.corpus.ner import answer_entity_labels
    from livingrag.experience.gate_learning import learning_settings
    from livingrag.experience.verifiers import build_verifier
    from livingrag.models.embedder import embedder_from_settings

    settings = load_settings()
    specs = [RunSpec.parse(r) for r in run]
    m, g = settings.models, settings.gates
    verifier = build_verifier(
        g.verifier,
        encoder=lambda: embedder_from_settings(m, queries=True),
        evidence_k=g.evidence_sentences,
        nli_model=g.nli_model,
        device=m.device,
    )

    def labeler(answer: str) -> list[str] | None:
        return answer_entity_labels(answer, m.ner_model, batch_size=m.ner_batch_size)

    def say(line: str) -> None:
        if not quiet and not as_json:
            console.print(line, highlight=False, markup=False)

    steps, fit = replay(specs, settings, verifier, labeler, rate=feedback_rate, seed=seed, system=system, progress=say)
    summary = summarize(steps, fit, start=start)
    used = {
        "runs": [str(Path(s.records)) for s in specs],
        "feedback_rate": feedback_rate,
        "feedback_seed": seed,
        "verifier": verifier.name,
    } | learning_settings(settings)
    if as_json:
        print_json({"settings": used, "summary": summary})
    else:
        console.print(format_report(summary, used), highlight=False, markup=False)
