"""Ships the repository's migrations/ inside the wheel as kvzarr/_migrations (setuptools
cannot map a folder outside the package from pyproject.toml alone). Everything else about
the build is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "kvzarr" / "_migrations"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(Path(__file__).parent / "migrations", target,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPy})
