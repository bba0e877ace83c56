"""The synchronous client's parts (src/sandtree/_sync_*.py) are not checked in: they are
generated from the async ones by scripts/unasync.py whenever the package is built (an sdist
carries them, so a wheel built from it needs no script). The rest is in pyproject.toml."""

import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

UNASYNC = Path(__file__).resolve().parent / "scripts" / "unasync.py"


def generate_sync_parts() -> None:
    if UNASYNC.exists():
        subprocess.run([sys.executable, str(UNASYNC)], check=True)


class BuildPy(build_py):
    def run(self) -> None:
        generate_sync_parts()
        super().run()


class Sdist(sdist):
    def run(self) -> None:
        generate_sync_parts()
        super().run()


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
