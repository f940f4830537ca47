#!/usr/bin/env bash
# Create or update the development environment .venv/ at the repository root.
#
# Idempotent: creates .venv/ with python3.11 when it is missing, and runs pip only when
# requirements.txt changed since the last successful install (its SHA-256 is kept in
# .venv/surge-requirements.sha256). Works from any current directory; exits non-zero on any
# failure. Set SURGE_PYTHON to use another Python 3.11 interpreter than `python3.11`.
#
# Two runs started at the same moment on a fresh checkout may both install; run it once
# before starting parallel jobs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
REQUIREMENTS="$ROOT/requirements.txt"
STAMP="$VENV/surge-requirements.sha256"
PYTHON="${SURGE_PYTHON:-python3.11}"

fail() {
    echo "setup_env: error: $*" >&2
    exit 1
}

is_python_311() {
    "$1" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' 2>/dev/null
}

[ -f "$REQUIREMENTS" ] || fail "$REQUIREMENTS not found"

if [ ! -x "$VENV/bin/python" ]; then
    command -v "$PYTHON" >/dev/null 2>&1 \
        || fail "'$PYTHON' not found on PATH. Blender 5.0 as a Python module (bpy) needs Python 3.11 exactly: install it (Debian/Ubuntu: apt-get install python3.11 python3.11-venv) or set SURGE_PYTHON to a Python 3.11 interpreter."
    if ! is_python_311 "$PYTHON"; then
        version="$("$PYTHON" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null)" || version="not runnable"
        fail "'$PYTHON' is Python ${version:-of unknown version}, not 3.11 (bpy 5.0 needs 3.11 exactly); set SURGE_PYTHON to a Python 3.11 interpreter."
    fi
    echo "setup_env: creating $VENV with $(command -v "$PYTHON")" >&2
    if ! "$PYTHON" -m venv "$VENV"; then
        rm -rf -- "$VENV"
        fail "'$PYTHON -m venv' failed (Debian/Ubuntu: apt-get install python3.11-venv); removed the partial $VENV"
    fi
fi

is_python_311 "$VENV/bin/python" \
    || fail "$VENV/bin/python is not a working Python 3.11; delete $VENV and run this script again."

wanted="$("$VENV/bin/python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$REQUIREMENTS")"
installed="$(cat "$STAMP" 2>/dev/null || true)"

if [ "$wanted" != "$installed" ]; then
    echo "setup_env: installing $REQUIREMENTS into $VENV (first run: about 1.2 GB, under a minute on a fast link)" >&2
    rm -f -- "$STAMP"
    PIP_NO_INPUT=1 "$VENV/bin/python" -m pip install --disable-pip-version-check -r "$REQUIREMENTS" \
        || fail "pip install -r requirements.txt failed (see above); nothing was recorded, the next run retries"
    "$VENV/bin/python" -m pip check --disable-pip-version-check >&2 \
        || fail "the installed packages have conflicting requirements (pip check, above)"
    printf '%s\n' "$wanted" > "$STAMP.tmp"
    mv -f -- "$STAMP.tmp" "$STAMP"
fi
