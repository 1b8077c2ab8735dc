"""Sparsification of the final activation (paper eq. 5) with a cap on map size.

    a~_t = sparsify(a_final, epsilon): entries below epsilon are set to zero.   (eq. 5)

The stored map additionally keeps at most ``max_entities`` entries (the strongest; ties go to the
smaller entity id) so that one query that lit up half the graph cannot bloat the store.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from livingrag.errors import InvalidInput


def validate_activation(activation: Mapping[Any, object], what: str = "activation") -> dict[int, float]:
    """An activation map as ``{int entity id: float weight}``; raises :class:`InvalidInput` naming
    the first malformed entry (non-integer id, non-finite or negative weight). The keys are typed
    ``Any`` (Mapping is invariant in its key type) because this is where unchecked ones are checked."""
    if not isinstance(activation, Mapping):
        raise InvalidInput(f"{what} must be a mapping of entity id to weight, got {type(activation).__name__}")
    out: dict[int, float] = {}
    for k, v in activation.items():
        try:
            if isinstance(k, bool):
                raise ValueError
            ent = int(k)
            if isinstance(k, float) and k != ent:
                raise ValueError
        except (TypeError, ValueError):
            raise InvalidInput(f"{what}: entity id {k!r} is not an integer") from None
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InvalidInput(f"{what}: weight of entity {ent} is not a number ({v!r})")
        w = float(v)
        if not math.isfinite(w):
            raise InvalidInput(f"{what}: weight of entity {ent} is not finite ({v!r})")
        if w < 0:
            raise InvalidInput(f"{what}: weight of entity {ent} is negative ({v!r})")
        out[ent] = w
    return out


def sparsify(activation: Mapping[int, float], epsilon: float, max_entities: int | None = None) -> dict[int, float]:
    """Eq. 5: keep entries ``>= epsilon`` (and ``> 0``), then at most ``max_entities`` of them."""
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    kept = {int(k): float(v) for k, v in activation.items() if v >= epsilon and v > 0.0}
    if max_entities is not None and len(kept) > max_entities:
        kept = dict(sorted(kept.items(), key=lambda kv: (-kv[1], kv[0]))[:max_entities])
    return kept
