"""The Python SDK: `phalanx.sdk.Client` (sync) and `AsyncClient`, on httpx, sharing the
models.

    from phalanx.sdk import Client
    with Client("https://phalanx.example.com", token=token, namespace="team-a") as phalanx:
        phalanx.create("job.yaml")
        phalanx.wait_for("my-job", "Succeeded", timeout=3600)
"""

from phalanx.sdk.client import AsyncClient, Client
from phalanx.sdk.errors import (
    ForbiddenError,
    InvalidError,
    JobEndedError,
    NotFoundError,
    PhalanxAPIError,
    UnauthorizedError,
)

__all__ = [
    "AsyncClient",
    "Client",
    "ForbiddenError",
    "InvalidError",
    "JobEndedError",
    "NotFoundError",
    "PhalanxAPIError",
    "UnauthorizedError",
]
