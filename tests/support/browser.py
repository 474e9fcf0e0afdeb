"""Shared pieces of the browser tests: a real service process, a headless Chromium, and the
page's helpers (plan a request on it, read the map's texts, take screenshots)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import pytest

import planner
from planner.generate import random_request
from tests.support.server_process import free_port

if TYPE_CHECKING:
    from selenium.webdriver import Chrome
    from selenium.webdriver.remote.webelement import WebElement

T = TypeVar("T")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
try:
    import selenium  # noqa: F401

    HAVE_SELENIUM = True
except ImportError:
    HAVE_SELENIUM = False

browser = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None or not HAVE_SELENIUM,
    reason="needs chromium, chromedriver and selenium",
)


def start_server() -> tuple[str, subprocess.Popen[bytes]]:
    """A service process on a free loopback port, answering /healthz."""
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "planner.api.app:create_app", "--factory"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return url, proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            err = proc.stderr.read().decode() if proc.stderr else ""
            pytest.fail(f"the server did not start: {err}")
        time.sleep(0.2)


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(timeout=30)


def start_driver(downloads: Path) -> Chrome:
    """Headless Chromium through selenium, saving downloads into ``downloads``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    assert CHROMIUM is not None
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1600",
    ):
        options.add_argument(arg)
    d = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    d.execute_cdp_cmd(
        "Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
    return d


def attribute(element: WebElement, name: str) -> str:
    """The attribute (or property) ``name`` of ``element``, which the page always sets."""
    value = element.get_attribute(name)
    assert value is not None, f"<{element.tag_name}> has no {name}"
    return value


def wait_for(condition: Callable[[], T | None], timeout: float = 60.0) -> T:
    """The first truthy value of ``condition``, polled until ``timeout`` seconds pass. A look
    that finds an element the page redrew meanwhile (stale) counts as not yet: the page is
    what is being waited for."""
    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except StaleElementReferenceException:
            value = None
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    url, proc = start_server()
    try:
        yield url
    finally:
        stop_server(proc)


@pytest.fixture(scope="module")
def downloads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the browser saves downloads into."""
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def driver(downloads: Path) -> Iterator[Chrome]:
    d = start_driver(downloads)
    try:
        yield d
    finally:
        d.quit()


# --- the page --------------------------------------------------------------------------------

# Every text of the map with its box in the map's pixels: [text, left, top, right, bottom, class].
JS_TEXT_BOXES = """
const svg = document.querySelector('#map svg');
const root = svg.getScreenCTM().inverse();
const out = [];
for (const t of svg.querySelectorAll('text')) {
  const b = t.getBBox();
  if (!b.width || getComputedStyle(t).display === 'none') continue;
  const m = root.multiply(t.getScreenCTM());
  const xs = [], ys = [];
  for (const [x, y] of [[b.x, b.y], [b.x + b.width, b.y], [b.x, b.y + b.height],
                        [b.x + b.width, b.y + b.height]]) {
    const p = new DOMPoint(x, y).matrixTransform(m);
    xs.push(p.x); ys.push(p.y);
  }
  out.push([t.textContent, Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys),
            t.getAttribute('class') || '']);
}
return out;
"""

# The placements table's cells, row by row.
JS_TABLE = """
return [...document.querySelectorAll('#placements tbody tr')].map(
  (r) => [...r.cells].map((c) => c.textContent));
"""


def overlaps(boxes: list[list[Any]]) -> list[tuple[str, str]]:
    """Pairs of text boxes that share any area (touching edges do not count)."""
    eps = 0.01
    ordered = sorted(boxes, key=lambda b: b[1])
    hits = []
    for i, a in enumerate(ordered):
        for b in ordered[i + 1 :]:
            if b[1] >= a[3] - eps:
                break  # sorted by left edge: nothing further right can meet a
            if a[2] < b[4] - eps and b[2] < a[4] - eps:
                hits.append((a[0], b[0]))
    return hits


def pixel_spread(png: bytes) -> tuple[float, int]:
    """Standard deviation of the grey levels and the number of distinct colours."""
    from PIL import Image, ImageStat

    image = Image.open(io.BytesIO(png)).convert("RGB")
    grey = ImageStat.Stat(image.convert("L")).stddev[0]
    colours = image.getcolors(maxcolors=1 << 20)
    return grey, len(colours) if colours is not None else 1 << 20


def screenshot(driver: Chrome, name: str, tmp_path: Path) -> bytes:
    """The page as a PNG, saved as ``name``.png in ``$WEB_SCREENSHOTS`` (else ``tmp_path``),
    after checking that no two texts of the map overprint."""
    from selenium.webdriver.common.by import By

    assert overlaps(driver.execute_script(JS_TEXT_BOXES)) == []
    png: bytes = driver.find_element(By.TAG_NAME, "body").screenshot_as_png
    folder = Path(os.environ.get("WEB_SCREENSHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.png").write_bytes(png)
    return png


def paste(driver: Chrome, text: str) -> None:
    """Put ``text`` in the request box, as a paste does."""
    from selenium.webdriver.common.by import By

    area = driver.find_element(By.ID, "request")
    area.clear()
    driver.execute_script("arguments[0].value = arguments[1];", area, text)


def state(driver: Chrome) -> str:
    from selenium.webdriver.common.by import By

    return attribute(driver.find_element(By.TAG_NAME, "body"), "data-state")


def open_page(driver: Chrome, server: str) -> None:
    """A fresh page whose controls have been filled from the service."""
    from selenium.webdriver.common.by import By

    driver.get(server + "/")
    wait_for(lambda: driver.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))


def lifetime(data: dict[str, Any], ident: str) -> tuple[int, int]:
    b = next(b for b in data["buffers"] if b["id"] == ident)
    return b["start"], b["end"]


def plan_on_page(driver: Chrome, server: str, data: dict[str, Any]) -> planner.Plan:
    """Plan ``data`` on a fresh page; the plan shown is the library's, and valid."""
    from selenium.webdriver.common.by import By

    open_page(driver, server)
    paste(driver, json.dumps(data))
    driver.find_element(By.ID, "plan").click()
    wait_for(lambda: state(driver) in ("planned", "error"))
    assert state(driver) == "planned", driver.find_element(By.ID, "errors").text
    plan = planner.plan(data)
    assert planner.validate(data, plan).valid
    want = sorted(
        [p.id, str(p.offset), str(p.size), p.memory, "[{}, {})".format(*lifetime(data, p.id))]
        for p in plan.placements
    )
    assert sorted(driver.execute_script(JS_TABLE)) == want
    return plan


def random_data(n: int, **kw: Any) -> dict[str, Any]:
    """A random request of ``n`` buffers as JSON data."""
    data: dict[str, Any] = random_request(n, **kw).model_dump(mode="json", exclude_none=True)
    return data
