"""Whether this image can write to the job's checkpoint URL, asked before any worker starts.

Why the agent asks: `spec.checkpoint.url` reaches every program as PHALANX_CHECKPOINT_URL, and
the program saves to it through fsspec, which needs a filesystem package per scheme (s3fs for
s3://, gcsfs for gs://). Phalanx's image has them; a user's own image may not, and then the
first save (or the resume) fails deep in an import, after the job has trained for a while, and
each restart fails the same way. Asked here, the pod stops at once with a reason that names the
field and the missing module (`exits.STORAGE_UNAVAILABLE`), which the operator records as the
job's ConfigurationError, no restart spent. Standard library only, as the rest of the agent.
"""

from __future__ import annotations

import importlib.util
import sys

FILESYSTEMS = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs"}
"""The package fsspec needs for each URL scheme Phalanx resumes from (file:// needs none)."""


def scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else "file"


def missing_modules(url: str) -> list[str]:
    """The Python modules this interpreter lacks to read and write `url` through fsspec."""
    needed = ["fsspec"]
    if package := FILESYSTEMS.get(scheme(url)):
        needed.append(package)
    return [name for name in needed if importlib.util.find_spec(name) is None]


def unavailable(url: str | None) -> str | None:
    """Why this image cannot keep checkpoints at `url` (None when it can, or there is none)."""
    if not url:
        return None
    missing = missing_modules(url)
    if not missing:
        return None
    names = " and ".join(missing)
    return (
        f"spec.checkpoint.url {url} needs the Python module{'s' if len(missing) > 1 else ''} "
        f"{names}, which this image's {sys.executable or 'python'} lacks: pip install "
        f"{' '.join(missing)} in the image (Phalanx's trainer image has them)"
    )
