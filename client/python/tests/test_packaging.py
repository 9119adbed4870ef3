"""Packaging: the version is meson's project version everywhere, and the
README's install commands (a virtual environment with the system's site
packages, pip from client/python with meson-python, no network, no build
isolation), run as printed in a fresh clone, install a package that talks
to musterd."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import muster

SRC = pathlib.Path(__file__).resolve().parent.parent
ROOT = SRC.parent.parent
BUILD_S = 280  # bound on the wheel build (it compiles libmuster again)


def test_version_is_meson_project_version():
    want = os.environ.get("MUSTER_TEST_VERSION")
    if not want:
        pytest.skip("MUSTER_TEST_VERSION is not set (run through meson test)")
    assert muster.__version__ == want
    out = subprocess.run([sys.executable, "-m", "muster", "--version"], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    assert out.strip() == f"muster {want}"
    read = subprocess.run([sys.executable, str(SRC / "version.py"), str(SRC / "../..")], capture_output=True,
                          text=True, check=True, timeout=30).stdout
    assert read.strip() == want


def _readme_install_block(readme):
    """The README's install commands: its sh block that makes the virtual environment."""
    for block in re.findall(r"```sh\n(.*?)```", readme.read_text(), re.S):
        if "python3 -m venv" in block:
            return block
    raise AssertionError(f"{readme} has no sh block with python3 -m venv")


def test_readme_install_in_fresh_clone(tmp_path, url):
    # Exactly the README's commands, in a fresh clone of this checkout, with
    # the python3 this suite runs under first on PATH and no package index.
    if not (ROOT / ".git").exists() or not shutil.which("git"):
        pytest.skip("not a git checkout")
    try:
        import ensurepip  # noqa: F401
        import mesonpy  # noqa: F401
    except ImportError as e:
        pytest.skip(f"{e.name} is missing (apt-get install python3-venv python3-mesonpy)")
    clone = tmp_path / "muster"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120, capture_output=True)
    block = _readme_install_block(clone / "README.md")
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    env.pop("PYTHONPATH", None)
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=clone, env=env, timeout=BUILD_S,
                         capture_output=True, text=True)
    assert run.returncode == 0, f"{block}\n{run.stdout}\n{run.stderr}"
    assert run.stdout.strip().splitlines()[-1] == f"muster {muster.__version__}"
    py = clone / ".venv" / "bin" / "python3"
    code = ("import muster, sys; c = muster.connect(sys.argv[1], timeout=5); c.set('in', 'venv');"
            "print(muster.__file__, c.get('in').decode(), muster.__version__)")
    out = subprocess.run([str(py), "-c", code, url], check=True, env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=60).stdout.split()
    assert out[0].startswith(str(clone / ".venv")), out  # the installed package, not the build tree
    assert out[1:] == ["venv", muster.__version__]
