#!/usr/bin/env bash
# Run the whole test suite: bash tools/test.sh [pytest options...]
# Sets up .venv/ first (tools/setup_env.sh). pytest's exit status is returned unchanged, so any
# failure, an interrupted run, or "no tests collected" (status 5) is a non-zero exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/tools/setup_env.sh"
cd "$ROOT"

status=0
.venv/bin/python -m pytest tests "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "test.sh: error: pytest collected no tests (exit status 5)" >&2
fi
exit "$status"
