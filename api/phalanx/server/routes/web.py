"""The web page: `/` and its static files (`web/`), served as they are: no build step."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
router = APIRouter(include_in_schema=False)


@router.get("/")
def index() -> FileResponse:
    return FileResponse(WEB_DIR / "index.html", headers={"Cache-Control": "no-cache"})


def mount(app: FastAPI) -> None:
    """`/` and `/static/...`; the page's data comes from `/api/v1` with the caller's token."""
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=WEB_DIR), name="static")
