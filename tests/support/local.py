"""Run `phalanx` as a user would, and read what it printed and left behind."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "deploy" / "examples" / "quickstart.yaml"
PHALANX = [sys.executable, "-m", "phalanx.cli"]


@dataclass
class Finished:
    """A finished `phalanx` command."""

    code: int
    stdout: str
    stderr: str

    @property
    def summary(self) -> dict[str, Any]:
        """The JSON summary: the last line of stdout (`--output json`)."""
        lines = self.stdout.strip().splitlines()
        assert lines, f"no output; stderr:\n{self.stderr[-3000:]}"
        result: dict[str, Any] = json.loads(lines[-1])
        return result


def phalanx(*args: str, cwd: Path = ROOT, timeout: float = 280) -> Finished:
    """Run the CLI in a subprocess to the end."""
    done = subprocess.run(
        [*PHALANX, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    return Finished(done.returncode, done.stdout, done.stderr)


def start_phalanx(*args: str, cwd: Path = ROOT) -> subprocess.Popen[str]:
    """Start the CLI in a subprocess (to interrupt it)."""
    return subprocess.Popen(
        [*PHALANX, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def manifest(tmp_path: Path, **changes: Any) -> Path:
    """The quickstart with `changes` merged into its spec, written to `tmp_path`."""
    job = yaml.safe_load(QUICKSTART.read_text())

    def merge(into: dict[str, Any], update: dict[str, Any]) -> None:
        for key, value in update.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                into[key] = value

    merge(job["spec"], changes)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def quickstart_args() -> list[str]:
    """The README's quickstart arguments, as the Makefile's `QUICKSTART` variable holds them."""
    for line in (ROOT / "Makefile").read_text().splitlines():
        if line.startswith("QUICKSTART :="):
            return line.split(":=", 1)[1].split()
    raise AssertionError("the Makefile has no QUICKSTART := line")


def event_reasons(summary: dict[str, Any]) -> list[str]:
    return [e["reason"] for e in summary["events"]]
