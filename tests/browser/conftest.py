"""Browser tests: Playwright for Python driving Debian's chromium (``make browser``, i.e.
``python3 -m devservices install-browser``, installs it; ``LB_CHROMIUM`` may point to another
build) against pytest-django's live server.

No browser is ever downloaded: Playwright launches the executable found here. Screenshots land
in ``.local/artifacts/`` (gitignored) for a human to look at after a run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

ARTIFACTS = Path(settings.BASE_DIR) / ".local" / "artifacts"
# Every wait in these tests is bounded by this (ms): a broken page fails fast.
ACTION_TIMEOUT_MS = 8000


def _chromium() -> str:
    path = os.environ.get("LB_CHROMIUM") or shutil.which("chromium")
    if not path:
        pytest.fail("chromium is missing: run `make browser` (devservices install-browser) first")
    return path


@pytest.fixture(scope="session")
def browser(django_db_setup, django_db_blocker) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread while it is open; the
    # tests' own ORM calls (and the database flushes between them) are still synchronous, so
    # Django's async-safety guard is lifted for exactly that lifetime, and restored after.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        yield from _launch(sync_playwright)
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def _launch(sync_playwright) -> Iterator[object]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=_chromium(),
            headless=True,
            # --no-sandbox: the suite may run as root in a container, where chromium's sandbox
            # refuses to start.
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser, live_server) -> Iterator[object]:
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1100, "height": 900})
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def screenshot(page, request):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> Path:
        path = ARTIFACTS / f"{request.node.name}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
