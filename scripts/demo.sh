#!/usr/bin/env bash
# Installs what is needed and runs the main job on the embedded defaults: `livingrag demo`
# (embedded PostgreSQL, offline models, no API key, no Docker, no network).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
VENV="${LIVINGRAG_VENV:-.venv}"
exec "$VENV/bin/livingrag" demo "$@"
