"""The repository passes its linter (ruff, settings in ``pyproject.toml``): no unused imports or
variables, no undefined names, no bare ``except:``, lines of at most 120 characters."""

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ruff() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "ruff")
    return here if os.path.exists(here) else (shutil.which("ruff") or "ruff")


def test_repository_passes_ruff():
    out = subprocess.run([_ruff(), "check", "--no-cache", "--output-format", "concise", ROOT],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_reports_a_bare_except(tmp_path):
    """The settings do catch what they are there for (a check that cannot fail is no check)."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\ntry:\n    pass\nexcept:\n    pass\n")
    out = subprocess.run([_ruff(), "check", "--no-cache", "--config", os.path.join(ROOT, "pyproject.toml"), str(bad)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "E722" in out.stdout and "F401" in out.stdout
