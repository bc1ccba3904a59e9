"""`phalanx-api`: serve the REST API with uvicorn. Settings from PHALANX_API_* or flags."""

from __future__ import annotations

import uvicorn

from phalanx.server.app import create_app
from phalanx.server.settings import ServerSettings


def main() -> None:
    settings = ServerSettings(_cli_parse_args=True)
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="info")


if __name__ == "__main__":
    main()
