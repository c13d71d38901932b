"""The layers of docs/architecture.md §2, checked by import-linter (contracts in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    lint = shutil.which("lint-imports")
    assert lint, "import-linter is a test dependency: pip install -e '.[test]'"
    proc = subprocess.run([lint, "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "BROKEN" not in proc.stdout and proc.stdout.count("KEPT") >= 2
