"""The oldest torch the resume library supports, checked when the library is imported.

Why at import: the library uses DCP's `DefaultStager` and `StagingOptions`, which came with torch
2.9. In an image with an older torch it would fail inside an import with a bare `ImportError`
naming a class, and the job would burn its restart budget on it; this names the version instead.
pyproject's `torch>=` bound says the same (`tests/unit/test_torch_floor.py` holds the two to one
value), and CI runs the library's tests with exactly this torch (`make test-torch-floor`).
"""

from __future__ import annotations

import re
from typing import Final

TORCH_FLOOR: Final = (2, 9)


class TorchTooOldError(ImportError):
    """The image's torch is older than the resume library supports."""


def release(version: str) -> tuple[int, int]:
    """The (major, minor) release of a torch version string ('2.9.0+cu128', '2.10.0a0+git1')."""
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None:
        raise ValueError(f"not a torch version: {version!r}")
    return int(found[1]), int(found[2])


def require_torch(version: str) -> None:
    """Raise TorchTooOldError, naming both versions, when `version` is below the floor."""
    if release(version) < TORCH_FLOOR:
        floor = ".".join(map(str, TORCH_FLOOR))
        raise TorchTooOldError(
            f"phalanx.resume needs torch >= {floor}; this environment has torch {version}. "
            f"Install torch>={floor} in the image, or run the script without phalanx.resume."
        )
