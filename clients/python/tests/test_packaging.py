"""The package as users get it (#23): an sdist and a wheel built with the standard tooling
(python -m build, setuptools), the wheel installed with pip into a fresh virtualenv with no
package index, and from there a script that creates a sandbox, runs a command and deletes it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from conftest import PY_ROOT, REPO, Server

SCRIPT = """
import json, sandtree
from sandtree import SandboxClient, CreateSandboxRequest
with SandboxClient() as c:  # SANDTREE_API_URL / SANDTREE_API_KEY
    sb = c.create(CreateSandboxRequest(docker_image="sandtree/busybox", memory_gb=0.25, labels={"suite": "python-sdk"}))
    try:
        c.wait_for_creation(sb.id, timeout=300)
        r = c.execute_command(sb.id, "echo hello from $(uname -s)")
    finally:
        c.delete(sb.id)
print(json.dumps({"version": sandtree.__version__, "file": sandtree.__file__, "stdout": r.stdout, "exit_code": r.exit_code}))
"""


def run(cmd: list, **kw: object) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)  # type: ignore[call-overload]
    assert r.returncode == 0, f"{cmd} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r


def test_wheel_installs_into_a_clean_venv_and_works(server: Server, tmp_path: Path) -> None:
    version = json.loads((REPO / "package.json").read_text())["version"]
    assert re.search(rf'^version = "{re.escape(version)}"$', (PY_ROOT / "pyproject.toml").read_text(), re.M)

    # Built from a copy (setuptools writes egg-info and build/ beside the sources), with the
    # root LICENSE copied in as a release would.
    src = tmp_path / "src"
    shutil.copytree(PY_ROOT, src, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", "build", "dist", "*.egg-info"))
    shutil.copy(REPO / "LICENSE", src / "LICENSE")
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(src)])
    wheel = dist / f"sandtree-{version}-py3-none-any.whl"
    sdist = dist / f"sandtree-{version}.tar.gz"
    assert wheel.exists() and sdist.exists(), sorted(p.name for p in dist.iterdir())
    names = zipfile.ZipFile(wheel).namelist()
    assert {"sandtree/py.typed", "sandtree/__init__.py", f"sandtree-{version}.dist-info/LICENSE"} <= set(names)
    assert f"sandtree-{version}/src/sandtree/py.typed" in tarfile.open(sdist).getnames()

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
    py = venv / "bin" / "python"
    # No index: its dependency (httpx) is found satisfied among the system's packages.
    run([str(py), "-m", "pip", "install", "--no-index", str(wheel)])

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SANDTREE_", "PYTHON"))}
    env.update(SANDTREE_API_URL=server.url, SANDTREE_API_KEY=server.key)
    out = run([str(py), "-c", SCRIPT], cwd=str(tmp_path), env=env).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["version"] == version
    assert result["file"].startswith(str(venv))
    assert (result["stdout"], result["exit_code"]) == ("hello from Linux\n", 0)
