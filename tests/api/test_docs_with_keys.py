"""/docs with API keys (a browser cannot send a bearer header to a page it opens): the
page, its script and the assets it loads are public and say nothing of the server's
data; the description and every call stay behind the key, which the page's script
sends as a header, never in a URL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from app.core.settings import load_settings
from app.main import create_app

KEY = "key-docs-0123456789"


@pytest.fixture(scope="module")
async def keyed(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(load_settings(api_keys=f"{KEY}:docs"), database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://docs.test") as c:
            yield c


async def test_the_page_and_its_assets_need_no_key(keyed: httpx.AsyncClient) -> None:
    page = await keyed.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'data-openapi="/openapi.json"' in page.text and 'type="password"' in page.text
    for path in (
        "/docs/contextd-docs.js",
        "/docs/assets/swagger-ui-bundle.js",
        "/docs/assets/swagger-ui.css",
        "/docs/assets/favicon.png",
    ):
        assert (await keyed.get(path)).status_code == 200, path
    script = (await keyed.get("/docs/contextd-docs.js")).text
    # The key travels as a header on the description's read and on every call.
    assert "Authorization" in script and "requestInterceptor" in script
    assert "sessionStorage" in script and "contextd.console.key" in script


@pytest.mark.parametrize(
    "path",
    ["/openapi.json", "/redoc", "/docs/oauth2-redirect", "/docs/assets/nothing.js", "/docsx"],
)
async def test_the_description_and_everything_else_need_the_key(
    keyed: httpx.AsyncClient, path: str
) -> None:
    r = await keyed.get(path)
    assert r.status_code == 401, (path, r.status_code)
    assert r.headers["content-type"] == "application/problem+json"


async def test_with_the_key_the_description_reads(keyed: httpx.AsyncClient) -> None:
    r = await keyed.get("/openapi.json", headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 200 and r.json()["openapi"].startswith("3.1")
    r = await keyed.get("/openapi.json", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
