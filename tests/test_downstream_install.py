"""The plugin as another repo uses it: built as a wheel, installed in a fresh virtual
environment, run on an example project that lives outside the package."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*cmd: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_wheel_installs_and_runs_a_yaml_suite_in_a_fresh_venv(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", wheels, ROOT)
    assert built.returncode == 0, built.stderr
    wheel = next(wheels.glob("pytest_elr-*.whl"))

    env_dir = tmp_path / "venv"
    # System site-packages give the dependencies already on this machine without a download;
    # the plugin itself comes only from the wheel.
    venv.EnvBuilder(with_pip=True, system_site_packages=True).create(env_dir)
    python = env_dir / "bin" / "python"
    installed = run(python, "-m", "pip", "install", "--no-deps", "--force-reinstall", wheel)
    assert installed.returncode == 0, installed.stderr

    project = tmp_path / "downstream"
    shutil.copytree(ROOT / "examples" / "downstream", project)
    result = run(python, "-m", "pytest", "-p", "no:cacheprovider", "--strict-markers", "-q",
                 "--rootdir", project, project, cwd=project)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "3 passed" in out, out
    assert "downstream-last-replica-standing" in out and "loss found" in out, out
    where = run(python, "-c", "import pytest_elr; print(pytest_elr.__file__)", cwd=project)
    assert str(env_dir) in where.stdout, f"plugin not loaded from the wheel: {where.stdout}"
