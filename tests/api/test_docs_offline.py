"""`/docs` and `/redoc` work without the internet: every asset they load is served
by contextd itself from an installed package, and no URL on them names another host."""

from __future__ import annotations

import re

import httpx
import pytest

# src/href attributes, the description /docs reads (`data-openapi`), Swagger UI's
# `url:` and Redoc's `spec-url`.
_URLS = re.compile(r"""(?:src|href|spec-url|data-openapi)="([^"]*)"|\burl: '([^']*)'""")


@pytest.mark.parametrize(
    ("page", "assets"),
    [
        ("/docs", {"/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css"}),
        ("/redoc", {"/docs/assets/redoc.standalone.js"}),
    ],
)
async def test_the_docs_pages_load_only_local_assets(
    client: httpx.AsyncClient, page: str, assets: set[str]
) -> None:
    r = await client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    html = r.text
    # No scheme and no protocol-relative URL anywhere on the page: nothing leaves.
    assert "http://" not in html and "https://" not in html and '"//' not in html
    urls = {a or b for a, b in _URLS.findall(html)}
    assert assets <= urls and "/openapi.json" in urls, urls
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), url
        served = await client.get(url)
        assert served.status_code == 200, url
        assert len(served.content) > 1000, url
    bundle = await client.get(sorted(a for a in assets if a.endswith(".js"))[0])
    assert bundle.headers["content-type"].startswith("text/javascript")


async def test_swagger_ui_is_a_version_that_reads_openapi_3_1(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    assert spec["openapi"].startswith("3.1")
    bundle = (await client.get("/docs/assets/swagger-ui-bundle.js")).text
    # Swagger UI reads OpenAPI 3.1 from version 5 on; 4.x shows an error instead.
    assert "OpenAPI 3.1" in bundle or "openapi31" in bundle.lower() or "isOAS31" in bundle
