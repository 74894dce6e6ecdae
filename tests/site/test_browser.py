"""The built site, rendered by a real browser: Debian's chromium, headless, driven by selenium.

The site is served over HTTP from a local server (as a docs host would serve it).  For each page
checked, every image must have loaded (``naturalWidth`` > 0) and every local URL the page uses
(``a[href]``, ``link[href]``, ``script[src]``, ``img[src]``) must answer 200 and, when it has a
``#fragment``, point at an element of that id on the target page.  In CI (``CI=true``) a missing
chromium or chromedriver fails the test; locally it skips with the reason.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.shared_data import skip_or_fail

#: The module-scoped HTTP server (``serve``) keeps its thread for all the tests of the module.
pytestmark = pytest.mark.threads_outlive_test

#: The browser: Debian's ``chromium`` (``apt-get install chromium chromium-driver``, what .ci/run
#: installs), else the names other systems give Chromium or Chrome; the first found is used, with
#: the ``chromedriver`` on PATH (it must match the browser's version, as Debian's packages do).
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
CHROMEDRIVER = "chromedriver"

#: Collected in the page: what it loaded and what it links to (absolute URLs, as the browser resolved them).
_COLLECT = """
return {
  images: Array.from(document.images).map(i => ({src: i.currentSrc || i.src, complete: i.complete,
                                                  width: i.naturalWidth})),
  urls: [
    ...Array.from(document.querySelectorAll('a[href]'), a => a.href),
    ...Array.from(document.querySelectorAll('link[href]'), l => l.href),
    ...Array.from(document.querySelectorAll('script[src]'), s => s.src),
    ...Array.from(document.images, i => i.src),
  ],
};
"""


@dataclass
class Problems:
    """What is wrong with one rendered page."""

    missing_images: list[str] = field(default_factory=list)
    broken_links: list[str] = field(default_factory=list)
    images: int = 0
    local_urls: int = 0


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("id", "name") and value:
                self.ids.add(value)


@functools.cache
def _fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            body = response.read()
            kind = response.headers.get_content_type()
            return response.status, body.decode("utf-8", "replace") if kind == "text/html" else ""
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def _ids(url: str) -> set[str]:
    parser = _Ids()
    parser.feed(_fetch(url)[1])
    return parser.ids


def check_page(driver: Any, url: str) -> Problems:
    """Load ``url`` in the browser and list its missing images and broken local links."""
    driver.get(url)
    driver.execute_async_script(  # until every image has settled (loaded or failed)
        "const done = arguments[arguments.length - 1];"
        "Promise.all(Array.from(document.images, i => i.decode().catch(() => null))).then(done);"
    )
    found = driver.execute_script(_COLLECT)
    origin = urllib.parse.urlsplit(url)[:2]
    problems = Problems(images=len(found["images"]))
    for image in found["images"]:
        if not image["complete"] or image["width"] == 0:
            problems.missing_images.append(image["src"])
    for target in sorted(set(found["urls"])):
        parts = urllib.parse.urlsplit(target)
        if parts[:2] != origin:
            continue  # external: not this site's to check
        problems.local_urls += 1
        page = urllib.parse.urlunsplit((*parts[:4], ""))
        status, _ = _fetch(page)
        if status != 200:
            problems.broken_links.append(f"{target} (HTTP {status})")
        elif parts.fragment and urllib.parse.unquote(parts.fragment) not in _ids(page):
            problems.broken_links.append(f"{target} (no element with that id)")
    return problems


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def serve() -> Iterator[Any]:
    """``serve(directory)`` -> the base URL of an HTTP server on 127.0.0.1 serving ``directory``."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(directory: Path) -> str:
        handler = functools.partial(_QuietHandler, directory=str(directory))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def find_browser() -> tuple[str, str]:
    """The browser and its driver; skips locally and fails in CI (``CI=true``) when one is missing."""
    chromium = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    chromedriver = shutil.which(CHROMEDRIVER)
    if chromium is None or chromedriver is None:
        skip_or_fail("chromium and chromedriver not found (apt-get install chromium chromium-driver)")
    return chromium, chromedriver


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    """Headless chromium under selenium, with Debian's chromedriver (no driver download)."""
    chromium, chromedriver = find_browser()
    try:
        from selenium import webdriver  # noqa: PLC0415 - installed by nox -s docs
        from selenium.webdriver.chrome.service import Service  # noqa: PLC0415
    except ImportError:
        skip_or_fail("selenium is not installed (nox -s docs installs it)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    browser = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    browser.set_script_timeout(60)
    browser.set_page_load_timeout(60)
    yield browser
    browser.quit()


def test_the_checker_finds_a_missing_image_and_broken_links(driver: Any, serve: Any, tmp_path: Path) -> None:
    """The check itself can fail: a page with a missing image and two broken links is caught."""
    (tmp_path / "ok.html").write_text('<p id="here">target</p>', encoding="utf-8")
    (tmp_path / "page.html").write_text(
        '<img src="missing.png"><a href="ok.html#here">fine</a> <a href="ok.html#gone">bad anchor</a>'
        ' <a href="nowhere.html">bad page</a> <a href="https://example.invalid/">external</a>',
        encoding="utf-8",
    )
    problems = check_page(driver, serve(tmp_path) + "page.html")
    assert [p.rsplit("/", 1)[-1] for p in problems.missing_images] == ["missing.png"]
    assert sorted(p.rsplit("/", 1)[-1] for p in problems.broken_links) == [
        "missing.png (HTTP 404)",
        "nowhere.html (HTTP 404)",
        "ok.html#gone (no element with that id)",
    ]


@pytest.mark.parametrize(
    "page",
    ["index.html", "api/structlog_etw.html#structlog_etw.EtwRenderer", "performance.html"],
)
def test_the_page_renders_with_no_missing_image_or_broken_link(
    driver: Any, serve: Any, site: Path, page: str
) -> None:
    """The page renders in a browser with no missing image or broken link, over ten local URLs checked."""
    problems = check_page(driver, serve(site) + page)
    assert problems.missing_images == []
    assert problems.broken_links == []
    assert problems.local_urls > 10  # the navigation, the theme's CSS and scripts were checked


def test_the_renderer_entry_is_shown(driver: Any, serve: Any, site: Path) -> None:
    """The API page shows the EtwRenderer entry with its provider_name parameter."""
    from selenium.webdriver.common.by import By  # noqa: PLC0415

    driver.get(serve(site) + "api/structlog_etw.html#structlog_etw.EtwRenderer")
    entry = driver.find_element(By.ID, "structlog_etw.EtwRenderer")
    assert entry.is_displayed()
    assert "EtwRenderer" in entry.text
    assert "provider_name" in entry.text


def test_the_performance_plot_is_drawn(driver: Any, serve: Any, site: Path) -> None:
    """performance.html draws performance.png at a real size (over 100 by 100 pixels)."""
    problems = check_page(driver, serve(site) + "performance.html")
    plots = driver.execute_script(
        "return Array.from(document.images).filter(i => i.src.endsWith('performance.png'))"
        ".map(i => [i.naturalWidth, i.naturalHeight]);"
    )
    assert problems.missing_images == []
    assert plots, "performance.html shows no performance.png"
    assert all(width > 100 and height > 100 for width, height in plots), plots


def test_a_missing_browser_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without chromium and chromedriver the browser tests fail in CI."""
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(pytest.fail.Exception, match="chromium and chromedriver not found"):
        find_browser()


def test_a_missing_browser_skips_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without chromium and chromedriver the browser tests are skipped outside CI."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(pytest.skip.Exception, match="chromium and chromedriver not found"):
        find_browser()
