#!/usr/bin/env bash
# Installs what is needed, checks the install (`livingrag doctor`) and runs the main job on the
# embedded defaults: `livingrag demo` (embedded PostgreSQL, offline models, no API key, no Docker,
# no network).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
VENV="${LIVINGRAG_VENV:-.venv}"
if ! "$VENV/bin/livingrag" doctor; then
    echo "demo.sh: \`livingrag doctor\` found a problem (see its fail and fix lines above); fix it and run" \
        "bash scripts/demo.sh again" >&2
    exit 1
fi
exec "$VENV/bin/livingrag" demo "$@"
