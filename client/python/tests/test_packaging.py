"""Packaging: the version is meson's project version everywhere, and a
wheel built by pip from client/python (meson-python, no network, no build
isolation) installs into a fresh virtual environment and talks to musterd."""

import os
import pathlib
import subprocess
import sys

import pytest

import muster

SRC = pathlib.Path(__file__).resolve().parent.parent
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


def test_wheel_builds_installs_and_connects(tmp_path, url):
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        pytest.skip("no pip (apt-get install python3-pip)")
    try:
        import mesonpy  # noqa: F401
    except ImportError:
        pytest.skip("no meson-python (apt-get install python3-mesonpy)")
    wheels = tmp_path / "wheels"
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(wheels),
                    str(SRC)], check=True, env=env, timeout=BUILD_S, capture_output=True)
    (wheel,) = wheels.glob("muster-*.whl")
    assert f"muster-{muster.__version__}-" in wheel.name
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=60)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "--no-deps", str(wheel)], check=True, env=env,
                   timeout=120, capture_output=True)
    code = ("import muster, sys; c = muster.connect(sys.argv[1], timeout=5); c.set('w', 'heel');"
            "print(muster.__file__, c.get('w').decode(), muster.__version__)")
    out = subprocess.run([str(py), "-c", code, url], check=True, env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=60).stdout.split()
    assert out[0].startswith(str(venv)), out  # the installed package, not the build tree
    assert out[1:] == ["heel", muster.__version__]
    ver = subprocess.run([str(py), "-m", "muster", "--version"], check=True, env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60).stdout
    assert ver.strip() == f"muster {muster.__version__}"
