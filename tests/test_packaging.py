"""Packaging rules of docs/architecture.md §2: operator/ and adapters/ are parts of gputwin, never top-level.

`import operator` must always find the standard library, whatever is on sys.path; the installed
package must expose `gputwin.operator` and `gputwin.adapters`; and every source folder must be
listed in pyproject.toml, because the package list is explicit.
"""

from __future__ import annotations

import site
import subprocess
import sys
import sysconfig
import tomllib
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
IMPORT_CHECK = "import gputwin.operator.config, gputwin.adapters.traces, operator; print(operator.__file__)"


def _packages_on_disk() -> set[str]:
    found = set()
    roots = {"gputwin": REPO / "src" / "gputwin", "gputwin.operator": REPO / "operator",
             "gputwin.adapters": REPO / "adapters"}  # fmt: skip
    for prefix, root in roots.items():
        for folder in [root, *(p for p in root.rglob("*") if p.is_dir())]:
            if "__pycache__" in folder.parts or not any(folder.glob("*.py")):
                continue
            rel = folder.relative_to(root).parts
            if prefix == "gputwin" and rel and rel[0] in ("operator", "adapters"):
                continue
            found.add(".".join((prefix, *rel)))
    return found


def test_every_source_folder_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    assert _packages_on_disk() <= listed


def test_operator_folder_never_shadows_the_standard_library() -> None:
    assert not (REPO / "operator" / "__init__.py").exists()
    # -S: nothing imported `operator` before us, so a shadowing folder would win here.
    proc = subprocess.run([sys.executable, "-S", "-c", "import operator; print(operator.__file__)"],
                          cwd=REPO, capture_output=True, text=True, check=True)  # fmt: skip
    assert not proc.stdout.strip().startswith(str(REPO))


def test_installed_package_exposes_operator_and_adapters_from_any_directory(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", IMPORT_CHECK], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert not proc.stdout.strip().startswith(str(REPO))


@pytest.mark.slow
def test_plain_pip_install_into_a_clean_venv_imports_operator(tmp_path: Path) -> None:
    # The wheel is built by the interpreter running the tests (it has the build requirements: the
    # test extra lists setuptools and wheel), then installed into a venv of its own. That venv sees
    # the test interpreter's site-packages for the dependencies (no network) through a .pth line,
    # which sys.path puts AFTER the venv's own site-packages; a plain path line processes no .pth
    # files there, so the editable install of this checkout stays invisible and the import below
    # can only find the freshly installed wheel. Nothing comes from the base interpreter.
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(wheels), str(REPO)], check=True, capture_output=True)  # fmt: skip
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    own_site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    # Every site folder of the test interpreter: a venv made with --system-site-packages finds some
    # dependencies in the base interpreter's.
    folders = dict.fromkeys([sysconfig.get_path("purelib"), *site.getsitepackages()])
    (Path(own_site) / "test-deps.pth").write_text("".join(f + "\n" for f in folders))
    (wheel,) = wheels.glob("gputwin-*.whl")
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True)  # fmt: skip
    proc = subprocess.run([python, "-c", IMPORT_CHECK + "; import gputwin; print(gputwin.__file__)"],
                          cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1].startswith(own_site)
