"""Which parts of LivingRAG run for a query: the modes and the paper's ablations (Table 5)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from livingrag.errors import InvalidInput

MODES = ("linear", "living")
ABLATIONS = ("fusion", "scaffold", "gate")
"""``fusion``: no activation-map fusion; ``scaffold``: no reasoning scaffold in the prompt;
``gate``: write back every candidate without the novelty and grounding gates."""


@dataclass(frozen=True)
class Mode:
    """``linear`` reads and writes no experience; ``living`` does both, minus any ablation."""

    name: str
    read: bool
    fusion: bool
    scaffold: bool
    write: bool
    gated: bool

    @property
    def system(self) -> str:
        """The system name used in logs and evaluation records (e.g. ``living-no-fusion``)."""
        return self.name

    @classmethod
    def parse(cls, mode: str = "living", ablations: Iterable[str] = ()) -> Mode:
        """Build a mode from its name and the ablated components (each named in :data:`ABLATIONS`)."""
        mode = mode.strip().lower()
        if mode not in MODES:
            raise InvalidInput(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        off = set()
        for a in ablations:
            a = a.strip().lower().removeprefix("no-").removeprefix("w/o ")
            if not a:
                continue
            if a not in ABLATIONS:
                raise InvalidInput(f"unknown ablation {a!r}; use any of {', '.join(ABLATIONS)}")
            off.add(a)
        if mode == "linear":
            if off:
                raise InvalidInput("ablations apply to the living mode only")
            return cls("linear", read=False, fusion=False, scaffold=False, write=False, gated=True)
        name = "living" + "".join(f"-no-{a}" for a in ABLATIONS if a in off)
        return cls(
            name,
            read=True,
            fusion="fusion" not in off,
            scaffold="scaffold" not in off,
            write=True,
            gated="gate" not in off,
        )

    @classmethod
    def from_system(cls, system: str) -> Mode:
        """Inverse of :attr:`system` (``living-no-fusion-no-gate`` -> living without fusion and gate)."""
        system = system.strip().lower()
        if system == "linear":
            return cls.parse("linear")
        if not system.startswith("living"):
            raise InvalidInput(f"unknown system {system!r}; use linear, living or living-no-<ablation>")
        rest = system[len("living") :]
        parts = [p for p in rest.split("-no-") if p]
        return cls.parse("living", parts)
