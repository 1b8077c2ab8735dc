"""What the installed llama.cpp runtime was built with, and whether it stays within the portable baseline.

Three independent readings of what is installed (never of what a build script meant to install,
since a pip wheel cache can serve a native wheel built earlier on the same machine):

1. **System info**: llama.cpp reports the instruction sets compiled into its CPU backend
   (``AVX512 = 1``, ``AMX_INT8 = 1``, ...); anything beyond :data:`cpu_support.BASELINE_BUILD_FEATURES`
   fails.
2. **Disassembly** (``--deep``): the CPU backend's machine code must hold no AVX-512 register or
   mask instruction, no AMX tile instruction and no VNNI dot product.
3. **Provenance**: ``scripts/install.sh`` records the sha256 of each library of the portable wheel it
   built and installed (``<venv>/livingrag-llama-build.json``); a library that differs was installed
   by something else (for example a native build from a wheel cache, which on this machine's CPU
   could look clean to 1 and 2).

``python -m livingrag.generation.providers.runtime_build check [--deep] [--json]`` exits 1 with the
reasons when a reading fails; ``record`` writes the provenance marker (install.sh runs it).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from livingrag.generation.providers.cpu_support import beyond_baseline, build_cmake_args, parse_system_info

__all__ = [
    "MARKER_NAME",
    "BuildReport",
    "disassembly_findings",
    "inspect_runtime",
    "library_digests",
    "marker_path",
    "runtime_lib_dir",
    "write_marker",
]

MARKER_NAME = "livingrag-llama-build.json"

# (feature, pattern over one line of `objdump -d` AT&T output)
_BEYOND_BASELINE: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("AMX", re.compile(r"%tmm\d|\b(ldtilecfg|sttilecfg|tileloadd\w*|tilestored|tilezero|tilerelease|tdp\w+)\b")),
    (
        "AVX-512",
        re.compile(r"%zmm\d|\{%k[1-7]\}|%k[0-7]\b|\b(kmov\w|vpternlog\w|vperm[ti]2\w+|vpcompress\w|vpexpand\w)\b"),
    ),
    ("VNNI", re.compile(r"\b(vpdpbusds?|vpdpwssds?)\b")),
    ("AVX512-BF16", re.compile(r"\b(vdpbf16ps|vcvtne2ps2bf16|vcvtneps2bf16)\b")),
)


def disassembly_findings(lines: Iterable[str], *, examples: int = 3) -> dict[str, list[str]]:
    """For each instruction set beyond the baseline, up to ``examples`` disassembly lines that use it."""
    found: dict[str, list[str]] = {}
    for line in lines:
        for feature, pattern in _BEYOND_BASELINE:
            if pattern.search(line):
                hits = found.setdefault(feature, [])
                if len(hits) < examples:
                    hits.append(" ".join(line.split()))
    return found


def runtime_lib_dir() -> Path | None:
    """The folder of llama-cpp-python's shared libraries, or None when it is not installed."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return None
    lib = Path(spec.origin).parent / "lib"
    return lib if lib.is_dir() else None


def _libraries(lib_dir: Path) -> list[Path]:
    return sorted(p for p in lib_dir.iterdir() if p.is_file() and (".so" in p.name or p.suffix == ".dylib"))


def library_digests(lib_dir: Path) -> dict[str, str]:
    """sha256 of each shared library in ``lib_dir``, by file name."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in _libraries(lib_dir)}


def marker_path(prefix: Path | None = None) -> Path:
    """Where install.sh records the portable build: ``<sys.prefix>/livingrag-llama-build.json``."""
    return Path(prefix if prefix is not None else sys.prefix) / MARKER_NAME


def _installed_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        return None


def write_marker(cmake_args: Iterable[str], *, prefix: Path | None = None) -> Path:
    """Record the installed runtime's libraries as the portable build made with ``cmake_args``."""
    lib_dir = runtime_lib_dir()
    if lib_dir is None:
        raise SystemExit("llama-cpp-python is not installed: nothing to record")
    data = {"version": _installed_version(), "cmake_args": list(cmake_args), "libraries": library_digests(lib_dir)}
    path = marker_path(prefix)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


@dataclass
class BuildReport:
    """One inspection of the installed runtime; ``problems`` is empty when it is the portable build."""

    version: str | None
    lib_dir: str | None
    system_info: str = ""
    beyond_baseline: list[str] = field(default_factory=list)
    disassembly: dict[str, list[str]] | None = None
    provenance: str = "unknown"
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _system_info() -> str:
    import llama_cpp

    raw = llama_cpp.llama_print_system_info()
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _cpu_backend(lib_dir: Path) -> list[Path]:
    """The CPU backend's libraries, one file per distinct content (wheels hold copies, not links)."""
    libs = _libraries(lib_dir)
    chosen = [p for p in libs if "ggml-cpu" in p.name] or [p for p in libs if "ggml" in p.name] or libs
    seen: set[bytes] = set()
    distinct = []
    for p in sorted(chosen, key=lambda p: len(p.name)):
        digest = hashlib.sha256(p.read_bytes()).digest()
        if digest not in seen:
            seen.add(digest)
            distinct.append(p)
    return distinct


def _disassemble(path: Path) -> list[str]:
    objdump = shutil.which("objdump")
    if objdump is None:
        raise FileNotFoundError("objdump (binutils) is needed for --deep")
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def inspect_runtime(*, deep: bool = False, marker: Path | None = None) -> BuildReport:
    """Inspect the installed llama.cpp runtime (see the module docstring for the three readings)."""
    lib_dir = runtime_lib_dir()
    report = BuildReport(version=_installed_version(), lib_dir=str(lib_dir) if lib_dir else None)
    if lib_dir is None:
        report.problems.append("llama-cpp-python is not installed (run scripts/install.sh)")
        return report
    report.system_info = _system_info()
    report.beyond_baseline = beyond_baseline(parse_system_info(report.system_info))
    if report.beyond_baseline:
        report.problems.append(
            f"the runtime was compiled with {', '.join(report.beyond_baseline)}, beyond the portable baseline "
            "(AVX2, FMA, F16C, BMI2): a native build; rebuild it with scripts/install.sh"
        )
    if deep:
        findings: dict[str, list[str]] = {}
        for lib in _cpu_backend(lib_dir):
            for feature, lines in disassembly_findings(_disassemble(lib)).items():
                findings.setdefault(feature, []).extend(f"{lib.name}: {line}" for line in lines)
        report.disassembly = findings
        if findings:
            report.problems.append(
                f"the runtime's machine code uses {', '.join(sorted(findings))} instructions "
                f"(e.g. {next(iter(findings.values()))[0]}); rebuild it with scripts/install.sh"
            )
    path = marker if marker is not None else marker_path()
    try:
        recorded = json.loads(path.read_text())
    except (OSError, ValueError):
        report.provenance = "missing"
        report.problems.append(
            f"no record of a portable build at {path}: this runtime was not installed by scripts/install.sh "
            "(a pip install builds llama.cpp natively); run scripts/install.sh"
        )
        return report
    installed = library_digests(lib_dir)
    differ = sorted(
        n
        for n in set(installed) | set(recorded.get("libraries", {}))
        if installed.get(n) != recorded["libraries"].get(n)
    )
    if differ or recorded.get("cmake_args") != list(build_cmake_args()):
        report.provenance = "differs"
        what = f"libraries differ from the recorded build: {', '.join(differ)}" if differ else "built with other flags"
        report.problems.append(
            f"the installed runtime is not the recorded portable build ({what}); run scripts/install.sh"
        )
    else:
        report.provenance = "portable build recorded by scripts/install.sh"
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m livingrag.generation.providers.runtime_build")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="exit 1 when the installed runtime is not the portable build")
    check.add_argument("--deep", action="store_true", help="also disassemble the CPU backend (needs objdump)")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    sub.add_parser("record", help="record the installed runtime as the portable build (scripts/install.sh)")
    sub.add_parser("cmake-args", help="print the portable build's CMake arguments")
    args = parser.parse_args(argv)
    if args.command == "cmake-args":
        print(" ".join(build_cmake_args()))
        return 0
    if args.command == "record":
        print(f"recorded {write_marker(build_cmake_args())}")
        return 0
    report = inspect_runtime(deep=args.deep)
    if args.json:
        print(json.dumps(asdict(report) | {"ok": report.ok}, indent=2))
    else:
        print(f"llama-cpp-python {report.version or '-'} at {report.lib_dir or '-'}")
        print(f"system info: {report.system_info.strip() or '-'}")
        print(f"provenance: {report.provenance}")
        for problem in report.problems:
            print(f"problem: {problem}")
        print("ok: the portable build" if report.ok else "not ok")
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
