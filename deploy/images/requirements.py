"""Print what installing Phalanx needs, one requirement a line, from pyproject.toml: the build
backend, the core dependencies and those of the given extras.

Why: the images install dependencies in a layer of their own, keyed on pyproject.toml alone, so
that a code change rebuilds only the small layer above it, which then needs no network
(`pip install --no-deps --no-build-isolation`). Used inside `docker build`, with the
image's own Python (3.11+: tomllib), so it imports nothing of Phalanx.

Usage: python requirements.py PYPROJECT EXTRA[,EXTRA...] [--exclude NAME[,NAME...]]
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path


def requirements(pyproject: str, extras: list[str], exclude: set[str]) -> list[str]:
    with Path(pyproject).open("rb") as file:
        pyproject_toml = tomllib.load(file)
    project = pyproject_toml["project"]
    wanted = [*pyproject_toml["build-system"]["requires"], *project["dependencies"]]
    for extra in extras:
        wanted += project["optional-dependencies"][extra]
    names = {}
    for requirement in wanted:
        name = re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()
        if name not in exclude:
            names.setdefault(name, requirement)
    return list(names.values())


def main(argv: list[str]) -> None:
    exclude: set[str] = set()
    if "--exclude" in argv:
        at = argv.index("--exclude")
        exclude = {name.strip().lower() for name in argv[at + 1].split(",") if name.strip()}
        argv = argv[:at] + argv[at + 2 :]
    pyproject, extras = argv[0], [e for e in argv[1].split(",") if e]
    print("\n".join(requirements(pyproject, extras, exclude)))


if __name__ == "__main__":
    main(sys.argv[1:])
