#!/usr/bin/env bash
# Bake and render the demo scene: bash tools/demo.sh [options of tools/demo.py...]
# Sets up .venv/ first (tools/setup_env.sh), then runs tools/demo.py from the repository root.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/tools/setup_env.sh"
cd "$ROOT"
exec .venv/bin/python tools/demo.py "$@"
