"""`/docs` (Swagger UI) and `/redoc` served with assets from an installed package.

FastAPI's own pages load their scripts and styles from a CDN, so they were blank
offline. The assets here ship in the `fastapi-offline` wheel (Swagger UI:
Apache-2.0; Redoc and the package: MIT); only its files are used. Nothing on these
pages names another host: no CDN, no web fonts, no validator badge.

With API keys, a browser cannot send a bearer header to `/docs` by itself. The page
and its script and assets (static files that say nothing about the server's data) are
public, as the console's page is; the description (`/openapi.json`) and every call
stay behind the key. The page reads the description with the key typed into it, kept
in the tab's sessionStorage under the console's name (one key for both pages), and
Swagger UI sends it as `Authorization: Bearer` with every "Try it out". A key never
goes in a URL or a cookie, so no link, log or other site can carry it.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs/assets"
SCRIPT_URL = "/docs/contextd-docs.js"
# The files of the wheel's folder the pages load: the only public ones under ASSETS_URL.
_ASSET_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png", "redoc.standalone.js")
# The console's sessionStorage name for the key (app/console/static/console.js).
_KEY_NAME = "contextd.console.key"


def is_public_docs_path(path: str) -> bool:
    """`/docs`, its script and the assets it loads need no key (the key is typed into
    the page); `/openapi.json`, `/redoc` and the API do."""
    return path in ("/docs", SCRIPT_URL) or (
        path.startswith(ASSETS_URL + "/") and path.removeprefix(ASSETS_URL + "/") in _ASSET_FILES
    )


def assets_dir() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


def install_docs(app: FastAPI, title: str) -> None:
    """Call on an app built with `docs_url=None, redoc_url=None`."""
    openapi_url = app.openapi_url or "/openapi.json"
    oauth2_redirect = "/docs/oauth2-redirect"
    app.mount(ASSETS_URL, StaticFiles(directory=assets_dir()), name="docs-assets")

    page = _page(title, openapi_url)

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    @app.get(SCRIPT_URL, include_in_schema=False)
    async def swagger_ui_script() -> Response:
        return Response(_SCRIPT, media_type="text/javascript; charset=utf-8")

    @app.get(oauth2_redirect, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{title} - ReDoc",
            redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )


def _page(title: str, openapi_url: str) -> str:
    from html import escape

    return f"""<!DOCTYPE html>
<html>
<head>
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link type="text/css" rel="stylesheet" href="{ASSETS_URL}/swagger-ui.css">
<link rel="shortcut icon" href="{ASSETS_URL}/favicon.png">
<title>{escape(title)} - Swagger UI</title>
</head>
<body>
<form id="contextd-key" hidden style="margin: 1em 2em; font-family: sans-serif">
<label>This server takes API keys. Key: <input id="contextd-key-input" type="password"
autocomplete="off" size="50"></label> <button type="submit">Use it</button>
<span id="contextd-key-note"></span>
<p>Kept in this tab only (sessionStorage, shared with the console at /ui/) and sent as
<code>Authorization: Bearer</code> with every call; it never goes in a URL.</p>
</form>
<div id="swagger-ui"></div>
<script src="{ASSETS_URL}/swagger-ui-bundle.js"></script>
<script src="{SCRIPT_URL}" data-openapi="{escape(openapi_url)}"></script>
</body>
</html>
"""


_SCRIPT = """// /docs with API keys: the description and every call carry the key typed here.
"use strict";
(function () {
  const KEY = "__KEY__";
  const openapi = document.currentScript.dataset.openapi;
  const form = document.getElementById("contextd-key");
  const note = document.getElementById("contextd-key-note");
  const bearer = () => {
    const key = sessionStorage.getItem(KEY);
    return key ? { Authorization: "Bearer " + key } : {};
  };
  async function start() {
    const init = { headers: bearer(), cache: "no-store", credentials: "omit" };
    const resp = await fetch(openapi, init);
    if (resp.status === 401) {
      note.textContent = sessionStorage.getItem(KEY) ? "That key was not accepted." : "";
      form.hidden = false;
      document.getElementById("contextd-key-input").focus();
      return;
    }
    form.hidden = true;
    SwaggerUIBundle({
      spec: await resp.json(),
      dom_id: "#swagger-ui",
      layout: "BaseLayout",
      deepLinking: true,
      validatorUrl: null, // else the description goes to an online validator
      presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
      requestInterceptor: (request) => {
        Object.assign(request.headers, bearer());
        return request;
      },
    });
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const input = document.getElementById("contextd-key-input");
    sessionStorage.setItem(KEY, input.value.trim());
    input.value = "";
    start();
  });
  start();
})();
""".replace("__KEY__", _KEY_NAME)
