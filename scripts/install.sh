#!/usr/bin/env bash
# Creates .venv (Python >= 3.11) and installs livingrag with everything it needs, offline models
# included. Idempotent: does nothing when pyproject.toml has not changed since the last install.
# torch is installed first, pinned to the CPU build, so that no dependency can pull a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3.11 python3.12 python3.13 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
      PY="$cand"; break
    fi
  done
fi
[ -n "$PY" ] || { echo "install: need Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2; exit 1; }

VENV="${LIVINGRAG_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "install: creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.livingrag-install"
want="$(cat pyproject.toml scripts/install.sh | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c 'import livingrag' 2>/dev/null; then
  exit 0
fi
pip_install() { "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q "$@"; }
echo "install: torch (CPU build)"
pip_install "torch==2.13.0"
# llama-cpp-python, the runtime of the offline answer model, has no binary wheel on PyPI: pip builds
# it from source with cmake and a C++ compiler (about 7 minutes on 2 idle cores, longer when they are
# busy). pip caches the built wheel, so a later install on the same machine takes seconds.
if ! "$VENV/bin/python" -c 'import llama_cpp' 2>/dev/null; then
  if ! command -v c++ >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "install: no C++ compiler; installing g++, make and cmake with apt-get"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++ make cmake
    else
      echo "install: llama-cpp-python needs a C++ compiler (g++ or clang++) and cmake; install them and rerun" >&2
      exit 1
    fi
  fi
  echo "install: llama-cpp-python (compiles llama.cpp from source: several minutes the first time)"
  t0=$(date +%s)
  CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" \
    pip_install "llama-cpp-python==0.3.36"
  echo "install: llama-cpp-python ready after $(( $(date +%s) - t0 )) s"
fi
echo "install: livingrag and its dependencies, offline models included (this takes a few minutes the first time)"
pip_install -e ".[dev]"
echo "$want" > "$stamp"
echo "install: done ($("$VENV/bin/livingrag" --version))"
