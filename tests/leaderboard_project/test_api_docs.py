"""/api/docs and /api/redoc load nothing from another host: their JS/CSS are our static files."""

from __future__ import annotations

import re

import pytest
from django.test import Client

URL = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|["'](https?://[^"']+)["']""")


@pytest.fixture
def client(settings) -> Client:
    # Tests run without collectstatic: whitenoise serves from the finders, as after it.
    settings.WHITENOISE_USE_FINDERS = True
    settings.WHITENOISE_AUTOREFRESH = True
    return Client()


@pytest.mark.parametrize("page", ["/api/docs", "/api/redoc"])
def test_docs_pages_use_only_local_static_files(client, page) -> None:
    response = client.get(page)
    assert response.status_code == 200
    html = response.content.decode()
    assert "cdn" not in html.lower()
    assert "@latest" not in html
    urls = [a or b for a, b in URL.findall(html)]
    assert urls, html
    for url in urls:
        assert not re.match(r"^(https?:)?//", url), f"{page} loads {url} from another host"
    static = [url for url in urls if url.startswith("/static/")]
    assert any(url.endswith(".js") for url in static), urls
    for url in static:
        served = client.get(url)
        assert served.status_code == 200, url
        assert b"".join(served.streaming_content if served.streaming else [served.content])
