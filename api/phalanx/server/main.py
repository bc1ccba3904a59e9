"""`phalanx-api`: serve the REST API with uvicorn. Settings from PHALANX_API_* or flags."""

from __future__ import annotations

import sys

import uvicorn
from pydantic import ValidationError

from phalanx.server.app import create_app
from phalanx.server.settings import ServerSettings


def main() -> None:
    try:
        settings = ServerSettings(_cli_parse_args=True)
    except ValidationError as error:
        for problem in error.errors():
            where = ".".join(str(part) for part in problem["loc"])
            print(f"phalanx-api: {where + ': ' if where else ''}{problem['msg']}", file=sys.stderr)
        raise SystemExit(2) from None
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level="info",
        ssl_certfile=settings.tls_cert_file,
        ssl_keyfile=settings.tls_key_file,
    )


if __name__ == "__main__":
    main()
