"""Per-tenant quotas (``api.max_corpora_per_tenant``, ``api.max_passages_per_corpus``,
``api.max_experiences_per_tenant``): the one check every caller uses, so that each refusal names
the quota and its value the same way. A quota of None is no quota."""

from __future__ import annotations

from livingrag.errors import QuotaExceeded


def over_quota(limit: int | None, current: int, adding: int) -> bool:
    """Whether ``current + adding`` items would pass ``limit`` (None: never)."""
    return limit is not None and adding > 0 and current + adding > limit


def check_quota(setting: str, limit: int | None, current: int, adding: int, what: str) -> None:
    """Raise :class:`QuotaExceeded` when adding ``adding`` ``what`` to ``current`` would pass
    ``limit`` (the setting named ``setting``); the message says how many there are and how many
    were asked for."""
    if over_quota(limit, current, adding):
        assert limit is not None
        raise QuotaExceeded(
            setting,
            limit,
            f"quota exceeded: {setting} = {limit} {what}; there are {current} and this request adds {adding}",
        )


__all__ = ["check_quota", "over_quota"]
