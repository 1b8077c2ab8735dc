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
echo "install: livingrag and its dependencies (this takes a few minutes the first time)"
pip_install -e ".[dev]"
echo "$want" > "$stamp"
echo "install: done ($("$VENV/bin/livingrag" --version))"
