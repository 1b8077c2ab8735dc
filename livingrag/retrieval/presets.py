"""Named retrieval presets: the LinearRAG reference's per-dataset settings.

See docs/corpora-and-retrieval.md (LinearRAG's reference; which preset for new corpora).

    preset            max_iterations  passage_ratio  delta  top_k_sentence  prf_depth
    musique                 5              2.0        0.1         4            0
    2wikimultihopqa         3              0.05       0.4         1            3
    hotpotqa                3              0.05       0.4         1            3
    custom            (the 2wikimultihopqa numbers; meant to be overridden field by field)

prf_depth (this project's, not the reference's: the pseudo-relevance re-ranking of
:mod:`livingrag.retrieval.pseudo_relevance`) was chosen on 2Wiki questions 1-500 (+2.0 points of
Recall@5) and musique_reuse (-0.4 points: off for MuSiQue); hotpotqa shares 2Wiki's numbers.

``retrieval.*`` settings that are set explicitly override the preset's value.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from livingrag.config import RetrievalSettings
from livingrag.errors import InvalidInput
from livingrag.retrieval.params import RetrievalParams

PRESETS: dict[str, dict[str, Any]] = {
    "musique": {"max_iterations": 5, "passage_ratio": 2.0, "delta": 0.1, "top_k_sentence": 4, "prf_depth": 0},
    "2wikimultihopqa": {"max_iterations": 3, "passage_ratio": 0.05, "delta": 0.4, "top_k_sentence": 1, "prf_depth": 3},
    "hotpotqa": {"max_iterations": 3, "passage_ratio": 0.05, "delta": 0.4, "top_k_sentence": 1, "prf_depth": 3},
}
PRESETS["custom"] = dict(PRESETS["2wikimultihopqa"])

_PRESET_FIELDS = ("max_iterations", "passage_ratio", "delta", "top_k_sentence", "prf_depth")
_SHARED_FIELDS = (
    "passage_node_weight",
    "damping",
    "ppr_tol",
    "ppr_max_iter",
    "length_norm_b",
    "top_k",
    "min_link_score",
    "question_gazetteer",
    "question_ner",
    "query_threads",
    "common_word_share",
    "title_boost",
    "prf_weight",
    "prf_mix",
    "prf_pool",
)


def preset_params(name: str) -> RetrievalParams:
    """The preset's numbers with the shared defaults."""
    try:
        return RetrievalParams(**PRESETS[name])
    except KeyError:
        raise InvalidInput(f"unknown retrieval preset {name!r}; known: {', '.join(sorted(PRESETS))}") from None


def preset_for(settings: RetrievalSettings, recorded: str | None) -> str:
    """The preset to search a corpus with: ``settings.preset`` when it was set explicitly
    (environment, settings file or code), else the one the corpus ``recorded`` at creation, else
    the settings' default. A MuSiQue corpus is then never searched with 2Wiki's numbers by a tool
    that builds its retriever from default settings (measured: per-passage Recall@5 0.592 with
    them, 0.625 with its own, on a MuSiQue dev stream)."""
    if "preset" in settings.model_fields_set or not recorded:
        return settings.preset
    return recorded


def resolve_params(settings: RetrievalSettings, **overrides: Any) -> RetrievalParams:
    """Preset values, then explicitly set ``retrieval.*`` settings, then ``overrides``."""
    params = preset_params(settings.preset)
    values: dict[str, Any] = {}
    for f in _PRESET_FIELDS:
        v = getattr(settings, f)
        if v is not None:
            values[f] = v
    for f in _SHARED_FIELDS:
        if f in type(settings).model_fields:
            values[f] = getattr(settings, f)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return replace(params, **values)


__all__ = ["PRESETS", "preset_for", "preset_params", "resolve_params"]
