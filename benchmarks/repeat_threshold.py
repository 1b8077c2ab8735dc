"""Why answer reuse decides repeats by text, not by an embedding threshold (experience.answer_reuse).

Embeds a stream's questions and, for each, a variant that differs only in case, punctuation and
spacing (what a repeat is), then prints: the cosine between each question and its variant (how high
a threshold must be to catch repeats), and the cosines between distinct questions whose gold answers
differ (how high it must be to exclude them). When the second reaches the first, no threshold
separates them, and reusing an answer above it would give a wrong answer. Usage:

    .venv/bin/python benchmarks/repeat_threshold.py --dataset 2wikimultihopqa \\
        --data-dir ../shared/datasets/2wikimultihopqa --limit 1000
"""

import argparse
import random

import numpy as np

from livingrag.config import get_settings
from livingrag.evaluation.datasets import load_dataset
from livingrag.experience.answer_reuse import question_key
from livingrag.models.embedder import embedder_from_settings


def variant(q: str, rng: random.Random) -> str:
    """q in other case and punctuation (the repeat stream's variants)."""
    v = q.rstrip("?.! ")
    v = rng.choice([v.lower(), v.upper(), v.capitalize(), v])
    return "  " + v + rng.choice(["", "?", "??", " ?", "!"]) + " "


ap = argparse.ArgumentParser(description="Embedding cosines of repeats vs distinct questions.")
ap.add_argument("--dataset", default="2wikimultihopqa")
ap.add_argument("--data-dir", required=True)
ap.add_argument("--limit", type=int, default=1000)
ap.add_argument("--seed", type=int, default=0)
args = ap.parse_args()

settings = get_settings()
ds = load_dataset(args.dataset, args.data_dir, limit=args.limit)
qs = [q for q in ds.questions]
rng = random.Random(args.seed)
texts = [q.question for q in qs]
variants = [variant(t, rng) for t in texts]
enc = embedder_from_settings(settings.models)
a = np.asarray(enc.encode(texts), dtype=np.float64)
b = np.asarray(enc.encode(variants), dtype=np.float64)
a /= np.linalg.norm(a, axis=1, keepdims=True)
b /= np.linalg.norm(b, axis=1, keepdims=True)
rep = np.sum(a * b, axis=1)
sims = a @ a.T
iu = np.triu_indices(len(qs), k=1)
answers = [frozenset(x.casefold() for x in q.answers) for q in qs]
differ = np.array([not (answers[i] & answers[j]) for i, j in zip(*iu, strict=True)])
distinct = sims[iu][differ]
same_key = sum(question_key(t) == question_key(v) for t, v in zip(texts, variants, strict=True))
print(f"dataset {args.dataset}: {len(qs)} questions, model {settings.models.embedding_model}, seed {args.seed}")
print(
    f"repeats (case/punctuation variants): cosine min {rep.min():.4f}, 1st percentile {np.percentile(rep, 1):.4f}, "
    f"median {np.median(rep):.4f}; text key equal for {same_key} of {len(qs)}"
)
print(f"distinct questions with different gold answers: {len(distinct)} pairs, cosine max {distinct.max():.4f}")
for t in (0.90, 0.95, 0.97, 0.98, 0.99):
    caught = float(np.mean(rep >= t))
    print(
        f"  threshold {t:.2f}: catches {100 * caught:5.1f} % of repeats, admits {int(np.sum(distinct >= t))} "
        f"pairs of distinct questions with different answers"
    )
