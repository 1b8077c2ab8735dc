#!/usr/bin/env bash
# Installs what is needed and runs the whole test suite (slow tests included) against a real
# PostgreSQL: LIVINGRAG_TEST_DB_URL if set, else an embedded server in a temporary directory.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
VENV="${LIVINGRAG_VENV:-.venv}"
# As root with apt-get, install.sh has installed chromium for the browser tests
# (tests/api/test_ui_browser.py): a missing browser there is a failure, not a skip.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  export LIVINGRAG_REQUIRE_BROWSER="${LIVINGRAG_REQUIRE_BROWSER:-1}"
fi
"$VENV/bin/ruff" check livingrag tests scripts
"$VENV/bin/ruff" format --check livingrag tests scripts
# The package layers ([tool.importlinter] in pyproject.toml): an upward import fails here.
"$VENV/bin/lint-imports" --no-cache --no-logo
"$VENV/bin/mypy"  # reads [tool.mypy] in pyproject.toml: livingrag/ and tests/
# benchmarks/ keeps only maintained scripts: linted, formatted and type-checked like the package.
"$VENV/bin/ruff" check benchmarks
"$VENV/bin/ruff" format --check benchmarks
"$VENV/bin/mypy" benchmarks  # the same [tool.mypy] settings, on these files
NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --quiet --site-dir site  # docs/: a broken link fails
exec "$VENV/bin/python" -m pytest "$@"
