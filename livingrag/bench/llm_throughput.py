"""``livingrag bench llm``: tokens per second of the configured answer model, through the real client path.

Each round sends two requests with a prompt of about ``prompt_words`` words that no earlier request
shares a prefix with (llama.cpp reuses the cached prefix of the previous prompt, which would skip the
prompt's evaluation): one with ``max_tokens=1`` (its latency is the prompt's evaluation) and one that
generates ``gen_tokens`` tokens. Then, per round,

    prompt tokens/s     = prompt_tokens / latency(max_tokens = 1)
    generation tokens/s = (completion_tokens - 1) / (latency(generation) - latency(max_tokens = 1))

and the report gives their medians over the rounds, with the runtime's build (system info and
whether it is the recorded portable build) for a provider=local model.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from livingrag.config import Settings
from livingrag.generation.llm import LLM

__all__ = ["LLMThroughput", "measure_llm"]

_FILLER = (
    "The harbour town kept careful records of every ship that arrived, the cargo it carried, the weather on the "
    "day it came in, and the names of the pilots who guided it past the shoals at the mouth of the river. "
)


@dataclass
class LLMThroughput:
    model: str
    provider: str
    threads: int | None
    rounds: int
    prompt_tokens: int
    gen_tokens: int
    prompt_tps: list[float] = field(default_factory=list)
    gen_tps: list[float] = field(default_factory=list)
    load_s: float = 0.0
    system_info: str | None = None
    build: str | None = None

    def summary(self) -> dict[str, Any]:
        data = asdict(self)
        data["prompt_tps_median"] = round(statistics.median(self.prompt_tps), 2) if self.prompt_tps else None
        data["gen_tps_median"] = round(statistics.median(self.gen_tps), 2) if self.gen_tps else None
        data["prompt_tps"] = [round(x, 2) for x in self.prompt_tps]
        data["gen_tps"] = [round(x, 2) for x in self.gen_tps]
        return data


def _prompt(i: int, words: int) -> list[dict[str, str]]:
    text = f"Record {i}: " + (_FILLER * (words // len(_FILLER.split()) + 1))
    text = " ".join(text.split()[:words])
    return [
        {"role": "user", "content": f"{text}\n\nNow count from 1 to 200 in digits, separated by commas."},
    ]


def measure_llm(
    settings: Settings, llm: LLM, *, rounds: int = 5, prompt_words: int = 300, gen_tokens: int = 64
) -> LLMThroughput:
    """Run ``rounds`` prompt-only and generation requests against ``llm`` (see the module docstring)."""
    threads = getattr(llm, "threads", None)
    report = LLMThroughput(
        model=getattr(llm, "name", settings.llm.model),
        provider=settings.llm.provider,
        threads=threads,
        rounds=rounds,
        prompt_tokens=0,
        gen_tokens=gen_tokens,
    )
    started = time.perf_counter()
    if hasattr(llm, "load"):
        llm.load()
    report.load_s = round(time.perf_counter() - started, 3)
    report.system_info = getattr(llm, "system_info", None)
    if settings.llm.provider == "local":
        from livingrag.generation.providers.runtime_build import inspect_runtime

        build = inspect_runtime()
        report.build = build.provenance if build.ok else "; ".join(build.problems)
    llm.complete(_prompt(-1, 16), max_tokens=2)  # warm-up: caches, threads, first allocations
    for i in range(rounds):
        first = llm.complete(_prompt(2 * i, prompt_words), max_tokens=1)
        long = llm.complete(_prompt(2 * i + 1, prompt_words), max_tokens=gen_tokens)
        report.prompt_tokens = first.prompt_tokens
        report.prompt_tps.append(first.prompt_tokens / first.latency_s)
        gen_s = long.latency_s - first.latency_s
        if long.completion_tokens > 1 and gen_s > 0:
            report.gen_tps.append((long.completion_tokens - 1) / gen_s)
    return report
