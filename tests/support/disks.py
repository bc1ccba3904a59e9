"""A small filesystem that fills up for real: a tmpfs of a given size (mounting needs root, as
CI has), for the tests of full checkpoint volumes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def small_tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """`mount` (created) as a tmpfs of `size` (`2m`), unmounted afterwards."""
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)
