#!/usr/bin/env bash
# Installs what is needed and runs the whole test suite (slow tests included) against a real
# PostgreSQL: LIVINGRAG_TEST_DB_URL if set, else an embedded server in a temporary directory.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
VENV="${LIVINGRAG_VENV:-.venv}"
"$VENV/bin/ruff" check livingrag tests scripts
"$VENV/bin/ruff" format --check livingrag tests scripts
exec "$VENV/bin/python" -m pytest "$@"
