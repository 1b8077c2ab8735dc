"""The local model's runtime: which CPUs it supports, what the installed build was built with, and
the supervision of its child process (fast tests on hand-made inputs and tiny Python children)."""

from __future__ import annotations

import signal
import sys
import textwrap
from pathlib import Path

import pytest

from livingrag.generation.providers.child_process import ChildStartError, SupervisedChild, describe_returncode
from livingrag.generation.providers.cpu_support import (
    BASELINE_BUILD_FEATURES,
    REQUIRED_CPU_FLAGS,
    beyond_baseline,
    build_cmake_args,
    cpu_refusal,
    missing_cpu_flags,
    parse_cpu_flags,
    parse_system_info,
)
from livingrag.generation.providers.llama_child import RequestError, parse_chat_request
from livingrag.generation.providers.runtime_build import disassembly_findings

ROOT = Path(__file__).resolve().parents[2]

SAPPHIRE_RAPIDS = (
    "fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi1 bmi2 avx512f avx512bw amx_bf16 amx_tile amx_int8"
)
NO_AVX2 = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx"  # e.g. Sandy Bridge, or a Pentium with AVX disabled


# -- CPU features -----------------------------------------------------------------------------------


def test_cpu_flags_are_read_from_the_first_flags_line() -> None:
    text = f"processor\t: 0\nmodel name\t: Xeon\nflags\t\t: {SAPPHIRE_RAPIDS}\n\nprocessor\t: 1\nflags\t\t: sse\n"
    flags = parse_cpu_flags(text)
    assert "amx_tile" in flags and "avx2" in flags and "sse" in flags and len(flags) == len(SAPPHIRE_RAPIDS.split())
    assert parse_cpu_flags("processor: 0\n") == frozenset()


def test_an_amx_cpu_is_supported_and_a_cpu_without_avx2_is_refused_by_name() -> None:
    assert missing_cpu_flags(SAPPHIRE_RAPIDS.split()) == []
    assert cpu_refusal(SAPPHIRE_RAPIDS.split()) is None
    assert missing_cpu_flags(NO_AVX2.split()) == ["avx2", "fma", "f16c", "bmi2"]
    message = cpu_refusal(NO_AVX2.split())
    assert message is not None
    assert "lacks AVX2, FMA, F16C, BMI2" in message and "LIVINGRAG_LLM__PROVIDER=openai" in message
    assert cpu_refusal(None) is None  # unknown (not Linux x86-64): not refused here


def test_this_machine_can_run_the_runtime() -> None:
    from livingrag.generation.providers.cpu_support import read_cpu_flags

    flags = read_cpu_flags()
    assert flags is None or cpu_refusal(flags) is None


def test_system_info_features_beyond_the_baseline() -> None:
    native_spr = (
        "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
        "AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | "
        "OPENMP = 1 | REPACK = 1 |"
    )
    portable = (
        "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 0 | "
        "LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |"
    )
    assert parse_system_info(portable)["AVX512"] is False and parse_system_info(portable)["AVX2"] is True
    assert beyond_baseline(parse_system_info(portable)) == []
    assert beyond_baseline(parse_system_info(native_spr)) == [
        "AMX_INT8",
        "AVX512",
        "AVX512_BF16",
        "AVX512_VBMI",
        "AVX512_VNNI",
        "AVX_VNNI",
    ]
    assert {"AVX2", "FMA", "F16C"} <= BASELINE_BUILD_FEATURES
    assert {f.upper() for f in REQUIRED_CPU_FLAGS} <= BASELINE_BUILD_FEATURES


def test_disassembly_findings_name_each_instruction_set() -> None:
    lines = [
        "  4011a0:\tvfmadd231ps %ymm1,%ymm2,%ymm0",  # AVX2/FMA: baseline
        "  4011a5:\tvpdpbusd %zmm1,%zmm2,%zmm0",  # AVX512-VNNI
        "  4011b0:\tldtilecfg (%rax)",  # AMX
        "  4011b8:\ttdpbssd %tmm2,%tmm1,%tmm0",
        "  4011c0:\tvmovups %ymm0,(%rdi){%k1}",  # AVX-512VL mask
        "  4011c8:\t{vex} vpdpbusd %ymm1,%ymm2,%ymm0",  # AVX-VNNI
    ]
    found = disassembly_findings(lines)
    assert set(found) == {"AVX-512", "AMX", "VNNI"}
    assert found["AMX"] == ["4011b0: ldtilecfg (%rax)", "4011b8: tdpbssd %tmm2,%tmm1,%tmm0"]
    assert len(found["VNNI"]) == 2 and len(found["AVX-512"]) == 2
    assert disassembly_findings(lines[:1]) == {}


def test_install_script_builds_with_the_flags_of_the_package() -> None:
    args = build_cmake_args()
    assert "-DGGML_NATIVE=OFF" in args and "-DGGML_AMX_INT8=OFF" in args and "-DGGML_AVX512=OFF" in args
    assert "-DGGML_AVX2=ON" in args and not any(a.startswith("#") for a in args)
    script = (ROOT / "scripts" / "install.sh").read_text()
    assert "livingrag/generation/providers/llama_build_flags.txt" in script
    assert "--no-cache-dir" in script and "runtime_build check" in script


# -- the child process --------------------------------------------------------------------------------


def child(tmp_path: Path, body: str) -> SupervisedChild:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(body))
    return SupervisedChild([sys.executable, str(script)], name="the test child")


def test_a_ready_child_reports_its_line_and_stops(tmp_path: Path) -> None:
    c = child(
        tmp_path,
        """
        import json, sys, time
        print("a stray line from a library")
        print(json.dumps({"event": "ready", "port": 1234}), flush=True)
        time.sleep(60)
        """,
    )
    assert c.wait_ready(30)["port"] == 1234 and c.alive
    c.stop()
    assert not c.alive and c.exit_description() == "SIGTERM (terminated)"


def test_a_child_that_reports_an_error_is_not_a_crash(tmp_path: Path) -> None:
    c = child(
        tmp_path,
        """
        import json, sys
        print(json.dumps({"event": "error", "message": "no such model file"}), flush=True)
        sys.exit(2)
        """,
    )
    with pytest.raises(ChildStartError, match="no such model file") as info:
        c.wait_ready(30)
    assert info.value.reported


def test_a_child_that_crashes_before_it_is_ready_names_the_signal_and_its_output(tmp_path: Path) -> None:
    c = child(
        tmp_path,
        """
        import os, signal, sys
        sys.stderr.write("llama.cpp: loading model\\n"); sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSEGV)
        """,
    )
    with pytest.raises(ChildStartError) as info:
        c.wait_ready(30)
    assert not info.value.reported
    message = str(info.value)
    assert "ended with SIGSEGV (segmentation fault) before it was ready" in message
    assert "llama.cpp: loading model" in message


def test_a_silent_child_is_stopped_after_the_start_timeout(tmp_path: Path) -> None:
    c = child(tmp_path, "import time\ntime.sleep(60)\n")
    with pytest.raises(ChildStartError, match=r"not ready within 0\.5 s"):
        c.wait_ready(0.5)
    assert not c.alive


def test_return_codes_read_as_a_person_reads_them() -> None:
    assert describe_returncode(None) == "still running"
    assert describe_returncode(2) == "exit status 2"
    assert describe_returncode(-signal.SIGSEGV) == "SIGSEGV (segmentation fault)"
    assert describe_returncode(-signal.SIGILL).startswith("SIGILL (illegal instruction")
    assert describe_returncode(-signal.SIGKILL).startswith("SIGKILL (killed")


# -- the child's request validation ---------------------------------------------------------------


def test_chat_requests_are_validated_field_by_field() -> None:
    ok = parse_chat_request({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stop": "\n"})
    assert ok == {
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        "temperature": 0.0,
        "stop": ["\n"],
        "grammar": None,
        "logprobs": False,
        "top_logprobs": 0,
        "stream": False,
        "stream_options": {},
    }
    bad = [
        ([], "must be a JSON object"),
        ({"messages": []}, "'messages' must be a non-empty list"),
        ({"messages": [{"role": "user"}]}, r"messages\[0\]"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "'max_tokens' must be at least 1"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": True}, "'max_tokens' has the wrong type"),
        ({"messages": [{"role": "user", "content": "x"}], "temperature": -1}, "'temperature' must not be negative"),
        ({"messages": [{"role": "user", "content": "x"}], "stop": [1]}, "'stop' must be a string or a list"),
        ({"messages": [{"role": "user", "content": "x"}], "grammar": 5}, "'grammar' has the wrong type"),
        ({"messages": [{"role": "user", "content": "x"}], "stream": "yes"}, "'stream' must be true or false"),
        ({"messages": [{"role": "user", "content": "x"}], "stream_options": 1}, "'stream_options' has the wrong type"),
    ]
    for body, message in bad:
        with pytest.raises(RequestError, match=message) as info:
            parse_chat_request(body)
        assert info.value.status == 400


# -- the installed runtime --------------------------------------------------------------------------


def test_the_installed_runtime_is_the_portable_build() -> None:
    """What is installed (not what a script meant to install) stays within the portable baseline:
    llama.cpp's own system info, the CPU backend's machine code, and the provenance record that
    scripts/install.sh writes for the wheel it built (a native wheel from a cache fails here)."""
    from livingrag.generation.providers.runtime_build import inspect_runtime

    report = inspect_runtime(deep=True)
    assert report.ok, "\n".join(report.problems)
    assert report.beyond_baseline == [] and report.disassembly == {}
    assert "AVX2 = 1" in report.system_info
    assert "AMX_INT8 = 1" not in report.system_info and "AVX512 = 1" not in report.system_info
    assert report.provenance.startswith("portable build")


def test_a_runtime_without_a_provenance_record_fails_the_check(tmp_path: Path) -> None:
    from livingrag.generation.providers.runtime_build import inspect_runtime

    report = inspect_runtime(marker=tmp_path / "none.json")
    assert not report.ok and report.provenance == "missing"
    assert any("not installed by scripts/install.sh" in p for p in report.problems)
