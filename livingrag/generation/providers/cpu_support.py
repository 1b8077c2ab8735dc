"""Which CPUs the local model runtime supports, and what the installed llama.cpp build was built with.

The runtime (llama-cpp-python's llama.cpp) is built by ``scripts/install.sh`` for one portable
baseline, never for the machine that builds it (``GGML_NATIVE=OFF``): a native build on an Intel CPU
with AMX picks AMX kernels and crashes in its first decode, and a native build carried to another
machine (a pip wheel cache, a copied virtualenv) can use instructions that machine lacks.

The baseline is x86-64 with AVX2, FMA, F16C and BMI2 (every Intel CPU since Haswell, every AMD CPU
since Excavator); AVX-512, AVX-VNNI and AMX are never compiled in. This module is pure except for
:func:`read_cpu_flags`, which reads ``/proc/cpuinfo``.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = [
    "BASELINE_BUILD_FEATURES",
    "BUILD_FLAGS_FILE",
    "REQUIRED_CPU_FLAGS",
    "beyond_baseline",
    "build_cmake_args",
    "cpu_refusal",
    "missing_cpu_flags",
    "parse_cpu_flags",
    "parse_system_info",
    "read_cpu_flags",
]

REQUIRED_CPU_FLAGS: tuple[str, ...] = ("avx", "avx2", "fma", "f16c", "bmi2")
"""``/proc/cpuinfo`` flags the portable build executes (its compile-time instruction sets)."""

BUILD_FLAGS_FILE = Path(__file__).with_name("llama_build_flags.txt")
"""The CMake arguments of the portable build, one a line; ``scripts/install.sh`` builds with them."""


def build_cmake_args(path: Path = BUILD_FLAGS_FILE) -> tuple[str, ...]:
    """The portable build's CMake arguments: the non-comment lines of :data:`BUILD_FLAGS_FILE`."""
    lines = (line.strip() for line in path.read_text().splitlines())
    return tuple(line for line in lines if line and not line.startswith("#"))


BASELINE_BUILD_FEATURES: frozenset[str] = frozenset(
    {"SSE3", "SSSE3", "SSE4_1", "SSE4_2", "AVX", "AVX2", "F16C", "FMA", "BMI2"}
)
"""Instruction-set features llama.cpp's system info may report as compiled in (``NAME = 1``)."""

_ISA_NAME = re.compile(r"^(SSE|SSSE|AVX|AMX|F16C|FMA|BMI|VNNI|VBMI|BF16|NEON|ARM|SVE|SME|RISCV|VSX|WASM|LASX|LSX)")
_FEATURE = re.compile(r"([A-Za-z0-9_]+)\s*=\s*([01])")


def parse_cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The feature flags of the first ``flags`` line of ``/proc/cpuinfo`` text (empty when absent)."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def read_cpu_flags(path: Path = Path("/proc/cpuinfo")) -> frozenset[str] | None:
    """This machine's CPU flags, or None where they cannot be read (not Linux, not x86-64)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    try:
        flags = parse_cpu_flags(path.read_text(errors="replace"))
    except OSError:
        return None
    return flags or None


def missing_cpu_flags(flags: Iterable[str]) -> list[str]:
    """The required flags (:data:`REQUIRED_CPU_FLAGS`) that ``flags`` lacks, in their order."""
    have = set(flags)
    return [f for f in REQUIRED_CPU_FLAGS if f not in have]


def cpu_refusal(flags: Iterable[str] | None) -> str | None:
    """Why the local model cannot run on a CPU with ``flags``, or None when it can (or flags are unknown)."""
    if flags is None:
        return None
    missing = missing_cpu_flags(flags)
    if not missing:
        return None
    return (
        f"this CPU lacks {', '.join(m.upper() for m in missing)}, which the local model runtime needs "
        "(llama.cpp built for x86-64 with AVX2, FMA, F16C and BMI2); use an OpenAI-compatible server instead: "
        "LIVINGRAG_LLM__PROVIDER=openai with LIVINGRAG_LLM__BASE_URL"
    )


def parse_system_info(text: str) -> dict[str, bool]:
    """The ``NAME = 0/1`` entries of llama.cpp's system info (``llama_print_system_info``)."""
    return {name.upper(): value == "1" for name, value in _FEATURE.findall(text)}


def beyond_baseline(features: Mapping[str, bool]) -> list[str]:
    """Instruction-set features compiled in (``= 1``) that are not in :data:`BASELINE_BUILD_FEATURES`.

    Entries that are not instruction sets (``LLAMAFILE``, ``OPENMP``, ``REPACK``, ...) are ignored.
    """
    return sorted(
        name for name, on in features.items() if on and _ISA_NAME.match(name) and name not in BASELINE_BUILD_FEATURES
    )
