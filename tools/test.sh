#!/usr/bin/env bash
# Run the whole test suite: bash tools/test.sh [pytest options...]
# Sets up .venv/ first (tools/setup_env.sh). pytest's exit status is returned unchanged, so any
# failure, an interrupted run, or "no tests collected" (status 5) is a non-zero exit.
# The tests run in SURGE_TEST_WORKERS processes (default 2, pytest-xdist): the tests inside Blender
# all in one of them (tests/conftest.py), the engine's tests spread over the others; 0 runs them in
# this process, one after the other.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/tools/setup_env.sh"
cd "$ROOT"

status=0
workers="${SURGE_TEST_WORKERS:-2}"
if [ "$workers" -gt 0 ]; then
    .venv/bin/python -m pytest tests -n "$workers" --dist loadgroup "$@" || status=$?
else
    .venv/bin/python -m pytest tests "$@" || status=$?
fi
if [ "$status" -eq 5 ]; then
    echo "test.sh: error: pytest collected no tests (exit status 5)" >&2
fi
exit "$status"
