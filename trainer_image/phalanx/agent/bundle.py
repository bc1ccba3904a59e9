"""`python -m phalanx.agent.bundle OUT`: the agent as one zipapp any image's `python3`
runs, with nothing installed.

Why a zipapp run by the image's own interpreter, not a frozen binary: the agent keeps a warm
fork server that imports the *image's* torch and the user's modules, so it must be that
interpreter; a frozen agent would bring its own Python, which cannot import them. The agent
imports only the standard library (`tests/unit/test_agent_bundle.py` runs the zipapp with
`python3 -I -S`: no site-packages at all), so one file of about 60 kB serves every image, every
Python from 3.9 on, and every architecture. The operator's pods get it from an init container
(see `phalanx.operator.builder.agent`), which copies it into a volume the training container
mounts.

The zip also carries what a worker imports: `phalanx.progress` (standard library only), the
frameworks' callbacks (`phalanx.integrations`) and the resume library (`phalanx.resume`, which
needs the image's torch). A worker started by an injected agent finds them on its path, so a
script reports progress and resumes without a pip install.
"""

from __future__ import annotations

import argparse
import io
import zipfile
from pathlib import Path

import phalanx.agent as agent_package
from phalanx import progress
from phalanx.models import env as env_module
from phalanx.models import exits

AGENT = Path(agent_package.__file__).parent
MODELS = Path(env_module.__file__).parent
PHALANX = Path(progress.__file__).parent
INTEGRATIONS = PHALANX / "integrations"
RESUME = PHALANX / "resume"
"""Where the modules come from: the installed packages (the bundle is built from what runs)."""

MODULES: tuple[tuple[Path, str], ...] = (
    (MODELS / "env.py", "phalanx/models/env.py"),
    (MODELS / "exits.py", "phalanx/models/exits.py"),
    (MODELS / "labels.py", "phalanx/models/labels.py"),
    (MODELS / "report_shards.py", "phalanx/models/report_shards.py"),
    (MODELS / "vocabulary.py", "phalanx/models/vocabulary.py"),
    (PHALANX / "progress.py", "phalanx/progress.py"),
    (PHALANX / "pod.py", "phalanx/pod.py"),
    (PHALANX / "phases.py", "phalanx/phases.py"),
)
"""The standard-library-only modules the agent imports outside its own package."""

PACKAGE_INITS = {
    "phalanx/__init__.py": '"""Phalanx, injected: the agent and phalanx.progress."""\n',
    "phalanx/models/__init__.py": '"""The parts of the models the agent needs (no pydantic)."""\n',
}
"""Packages get their own small `__init__`: the installed ones import pydantic (models) or are
namespace packages, which a zip cannot hold."""

MAIN = f'''"""The Phalanx agent, injected: `python3 phalanx-agent.pyz COMMAND...`."""
import sys

if sys.version_info < (3, 9):  # written so that even Python 2 reads it
    sys.stderr.write("phalanx-agent: needs Python 3.9 or later, not " + sys.version.split()[0])
    sys.exit({exits.AGENT_UNSUPPORTED})  # the operator then runs the command without the agent

from phalanx.agent.main import run

if __name__ == "__main__":  # not when multiprocessing re-imports it in a warm worker
    run()
'''

FILE_NAME = "phalanx-agent.pyz"


def files() -> dict[str, bytes]:
    """Every file of the zipapp, by its path inside it."""
    found = {inside: path.read_bytes() for path, inside in MODULES}
    for path in sorted(AGENT.glob("*.py")):
        if path.name not in ("bundle.py", "__main__.py"):
            found[f"phalanx/agent/{path.name}"] = path.read_bytes()
    for package in (INTEGRATIONS, RESUME):  # imported by workers (with torch), never by the agent
        for path in sorted(package.glob("*.py")):
            found[f"phalanx/{package.name}/{path.name}"] = path.read_bytes()
    found |= {inside: text.encode() for inside, text in PACKAGE_INITS.items()}
    found["__main__.py"] = MAIN.encode()
    return found


def build() -> bytes:
    """The zipapp's bytes: a shebang line, then the zip (deterministic: fixed timestamps)."""
    buffer = io.BytesIO()
    buffer.write(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for inside, data in sorted(files().items()):
            info = zipfile.ZipInfo(inside, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def write(path: Path) -> Path:
    """Write the zipapp to `path` (a directory gets `phalanx-agent.pyz` in it), executable."""
    if path.is_dir():
        path = path / FILE_NAME
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(build())
    tmp.chmod(0o755)
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help=f"the file to write, or a directory for {FILE_NAME}")
    written = write(parser.parse_args(argv).out)
    print(f"{written}: {written.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
