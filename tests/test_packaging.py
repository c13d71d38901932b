"""Packaging rules of docs/architecture.md §2: operator/ and adapters/ are parts of gputwin, never top-level.

`import operator` must always find the standard library, whatever is on sys.path; the installed
package must expose `gputwin.operator` and `gputwin.adapters`; and every source folder must be
listed in pyproject.toml, because the package list is explicit. A wheel built where the C compiler
fails is pure Python and says so (setup.py's fallback; the compiled wheel is .ci/run's).
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from gputwin import __version__
from gputwin.api.resources import demo_cluster_path, demo_trace_path

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


def _build_wheel(tmp_path: Path, **env: str) -> tuple[Path, str]:
    """The wheel of this checkout, built by the interpreter running the tests (the test extra has the
    build requirements: setuptools, wheel, mypy), and the build's output (-v: pip hides it otherwise)."""
    wheels = tmp_path / "wheels"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                           "--wheel-dir", str(wheels), str(REPO)],
                          capture_output=True, text=True, env={**os.environ, **env})  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = wheels.glob("gputwin-*.whl")
    return wheel, proc.stdout + proc.stderr


def _venv_with(tmp_path: Path, wheel: Path) -> tuple[Path, str]:
    """A venv of its own with the wheel installed; its python and its site-packages.

    That venv sees the test interpreter's site-packages for the dependencies (no network) through a
    .pth line, which sys.path puts AFTER the venv's own site-packages; a plain path line processes no
    .pth files there, so the editable install of this checkout stays invisible and gputwin can only be
    the freshly installed wheel. Nothing comes from the base interpreter.
    """
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    own_site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    # Every site folder of the test interpreter: a venv made with --system-site-packages finds some
    # dependencies in the base interpreter's.
    folders = dict.fromkeys([sysconfig.get_path("purelib"), *site.getsitepackages()])
    (Path(own_site) / "test-deps.pth").write_text("".join(f + "\n" for f in folders))
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True)  # fmt: skip
    return python, own_site


@pytest.mark.slow
def test_plain_pip_install_into_a_clean_venv_imports_operator(tmp_path: Path) -> None:
    wheel, _ = _build_wheel(tmp_path, GPUTWIN_COMPILE="0")  # the layout is the same compiled or not
    python, own_site = _venv_with(tmp_path, wheel)
    proc = subprocess.run([python, "-c", IMPORT_CHECK + "; import gputwin; print(gputwin.__file__)"],
                          cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1].startswith(own_site)


@pytest.mark.slow
def test_without_a_c_compiler_the_wheel_is_pure_python_and_says_so_in_one_line(tmp_path: Path) -> None:
    # CC=/bin/false: mypyc generates the C, then every compile fails, as it would with no compiler.
    # Extensions an earlier build left in build/ must not ride along into the pure wheel either.
    wheel, log = _build_wheel(tmp_path, CC="/bin/false", GPUTWIN_COMPILE="")
    notices = [line.strip() for line in log.splitlines() if "gputwin: building the pure Python core" in line]
    assert len(notices) == 1 and "/bin/false" in notices[0], notices
    assert wheel.name.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert not [n for n in archive.namelist() if n.endswith(tuple(EXTENSION_SUFFIXES))]
    python, _ = _venv_with(tmp_path, wheel)
    cli = python.parent / "gputwin"
    proc = subprocess.run([cli, "--version"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == f"gputwin, version {__version__} (pure Python core)"
    demo = subprocess.run([cli, "simulate", "--trace", demo_trace_path(), "--cluster", demo_cluster_path(),
                           "--json"], cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert demo.returncode == 0, demo.stderr
    assert json.loads(demo.stdout)["jobs"] > 0
