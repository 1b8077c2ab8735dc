"""Which scaffold the prompt of eq. 14 gets for a provider: shown or not, with names or masked.

Both choices depend on the answer model, not on the question: the packaged 0.5B model follows (and
copies) whatever it is shown, a larger hosted model reads eq. 6's scaffold as the paper intends.
"""

from __future__ import annotations

from livingrag.config import Settings


def scaffolds_shown(settings: Settings) -> bool:
    """``experience.scaffold``: ``auto`` shows eq. 13's scaffold to every provider but the local model.

    Measured on the development streams with the local 0.5B model (LivingRAG against LinearRAG on the
    questions that got a masked scaffold): the first 100 2Wiki questions with this project's template
    floor, +2.6 completion tokens per scaffolded question, 5 answers fixed and 4 broken; the first 300
    with the earlier defaults, +2.8, 15 fixed and 18 broken; MuSiQue-100, +3.3, 3 fixed and 0 broken.
    The scaffold's "Key reasoning" line makes the model copy longer evidence sentences, and what it
    shows (a pattern of another question of the same form) carries nothing this question needs.
    Findings, which state what earlier questions established with their names, stay on either way."""
    mode = settings.experience.scaffold
    return settings.llm.provider != "local" if mode == "auto" else mode == "on"


def scaffolds_masked(settings: Settings) -> bool:
    """``experience.scaffold_entities``: ``auto`` masks for the local model (on the first 100 2Wiki
    questions the 0.5B model answered with the scaffold's own earlier answer in 27 of 95 scaffolded
    prompts, 21 of them wrong) and keeps names for any other provider, as eq. 6 writes them."""
    mode = settings.experience.scaffold_entities
    return settings.llm.provider == "local" if mode == "auto" else mode == "mask"
