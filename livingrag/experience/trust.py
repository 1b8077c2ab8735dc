"""Provenance and trust of experiences, and which uses each trust allows (beyond the paper).

With the offline models no automatic signal tells right answers from wrong ones (the grounding
gate's GS has ROC AUC 0.54-0.68 on the kept streams), so what memory serves is decided by who
vouches for it:

    origin  = gate (the automatic gate; detail: its verifier) | judge (an LLM judge; detail: its
              model) | person (a person's correction or word; detail: who) | ungated (the
              "w/o quality gate" ablation)
    trust   = unverified (nobody checked it) | auto_verified (the tenant's learned gate stored it at
              a probability whose held-out precision reaches gates.serve_min_precision; see
              :mod:`livingrag.experience.calibration`) | verified (a person said it is right) |
              retracted (a person said it is wrong: inactive, never served)

A use needs a level, one setting each (``experience.reuse_answers_from``, ``scaffolds_from``,
``fusion_from``):

    allows(level, trust, gated) = trust != retracted and (
        level = active                                    # any active experience
        or level = gated and (gated or trust = verified)  # stored through the gates, or verified
        or level = auto_verified and trust in {auto_verified, verified}
        or level = verified and trust = verified)         # a person vouched for it

Pure: no database, no model, no settings.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ORIGINS",
    "TRUSTS",
    "USE_LEVELS",
    "Actor",
    "allows",
    "evidence_hash",
    "origin_of",
    "serves_answer",
]

TRUSTS: tuple[str, ...] = ("unverified", "auto_verified", "verified", "retracted")
ORIGINS: tuple[str, ...] = ("gate", "judge", "person", "ungated")
USE_LEVELS: tuple[str, ...] = ("verified", "auto_verified", "gated", "active")
UseLevel = Literal["verified", "auto_verified", "gated", "active"]


def allows(level: str, *, trust: str, gated: bool) -> bool:
    """Whether an experience of ``trust`` (stored through the gates when ``gated``) may be used at
    ``level`` (module docstring). A retracted experience is allowed nothing."""
    if level not in USE_LEVELS:
        raise ValueError(f"use level must be one of {', '.join(USE_LEVELS)}, got {level!r}")
    if trust not in TRUSTS:
        raise ValueError(f"trust must be one of {', '.join(TRUSTS)}, got {trust!r}")
    if trust == "retracted":
        return False
    if level == "active":
        return True
    if level == "gated":
        return gated or trust == "verified"
    if level == "auto_verified":
        return trust in ("auto_verified", "verified")
    return trust == "verified"


def serves_answer(policy: str, *, trust: str, gated: bool, confidence: float, floor: float) -> bool:
    """Whether ``experience.reuse_answers_from = policy`` lets an active experience of ``trust``
    answer a repeated question without an LLM call: a verified one always; an auto-verified one at
    ``auto_verified`` and ``gated``; an unverified one only at ``gated``, stored through the gates
    with confidence at least ``floor``."""
    if trust == "verified":
        return True
    if trust == "auto_verified":
        return policy in ("auto_verified", "gated")
    return policy == "gated" and gated and confidence >= floor


def origin_of(verifier: str, *, gated: bool, judge_model: str | None = None) -> tuple[str, str]:
    """``(origin, origin_detail)`` of an experience the write-back stores: ``ungated`` when the
    gates were off, ``judge`` with the judge's model when the verifier is the LLM judge, else
    ``gate`` with the verifier's name."""
    if not gated:
        return "ungated", "gates off"
    if verifier == "judge":
        return "judge", judge_model or "the answer model"
    return "gate", verifier


def evidence_hash(title: str | None, text: str) -> str:
    """``sha256(title + "\\n" + text)``, hex: what a cited passage said when a candidate was
    answered, so that storing it later (on a person's word) can tell whether the passage changed."""
    return hashlib.sha256(f"{title or ''}\n{text}".encode()).hexdigest()


@dataclass(frozen=True)
class Actor:
    """Who did something to an experience: an API key (``key 12``), the tenant's operator acting
    through the admin key (``admin``), the command line (``operator``) or the service itself
    (``system``). ``label`` is what the history shows."""

    label: str
    key_id: int | None = None

    @classmethod
    def key(cls, key_id: int) -> Actor:
        """An API key of the tenant."""
        return cls(f"key {int(key_id)}", int(key_id))

    @classmethod
    def admin(cls) -> Actor:
        """The admin key acting for a tenant (the web console's operator)."""
        return cls("admin")

    @classmethod
    def operator(cls, name: str | None = None) -> Actor:
        """Someone at the command line (``operator`` or ``operator <name>``)."""
        return cls(f"operator {name}" if name else "operator")

    @classmethod
    def system(cls) -> Actor:
        """The service itself (write-back, staleness, uses)."""
        return cls("system")
