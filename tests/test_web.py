"""The web page: its routes in-process, and end to end in headless Chromium (skipped cleanly
when Chromium, its driver or selenium is missing)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

import planner
from api import create_app
from planner.emit import emit_cuda, emit_mlir, emit_svg
from planner.io import parse_request

from .test_svg import TEN

STATIC = Path(__file__).parent.parent / "api" / "static"

JSON = {"content-type": "application/json"}  # the content type every POST body needs


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app()) as c:
        yield c


def test_page_and_assets(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script src="/static/app.js">' in page.text
    for name, media in [("app.js", "text/javascript"), ("style.css", "text/css")]:
        asset = client.get(f"/static/{name}")
        assert asset.status_code == 200
        assert asset.headers["content-type"].startswith(media)
    example = client.get("/static/example.json")
    assert planner.plan(example.content).status == "optimal"
    assert client.get("/static/../app.py").status_code == 404
    assert client.get("/static/index.html.bak").status_code == 404


@pytest.mark.parametrize("kind", ["cuda", "mlir", "svg"])
def test_emit_matches_the_library(client: TestClient, kind: str) -> None:
    request = parse_request(TEN)
    plan = planner.plan(request)
    body = {"request": TEN, "plan": json.loads(plan.model_dump_json())}
    response = client.post(f"/emit/{kind}", json=body)
    assert response.status_code == 200, response.text
    emit = {"cuda": emit_cuda, "mlir": emit_mlir, "svg": emit_svg}[kind]
    assert response.text == emit(request, plan)


def test_emit_rejects_bad_input(client: TestClient) -> None:
    plan = json.loads(planner.plan(TEN).model_dump_json())
    bad_request = {**TEN, "buffers": [{**TEN["buffers"][0], "end": 0}, *TEN["buffers"][1:]]}
    response = client.post("/emit/cuda", json={"request": bad_request, "plan": plan})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "request", "buffers", 0, "end"]
    moved = {
        **plan,
        "placements": [{**plan["placements"][0], "offset": 8}, *plan["placements"][1:]],
    }
    response = client.post("/emit/svg", json={"request": TEN, "plan": moved})
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body", "plan"]
    assert "static check" in detail["msg"]
    response = client.post("/emit/mlir", json={"request": TEN, "plan": {"name": "x"}})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][:2] == ["body", "plan"]
    assert client.post("/emit/cuda", content=b"{", headers=JSON).status_code == 422
    assert client.post("/emit/cuda", json={"request": TEN}).json()["detail"][0]["loc"] == [
        "body",
        "plan",
    ]
    assert client.post("/emit/ptx", json={"request": TEN, "plan": plan}).status_code == 422


# --- end to end in a real browser --------------------------------------------------------

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "api.app:create_app",
            "--factory",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read().decode() if proc.stderr else ""
                pytest.fail(f"the server did not start: {err}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
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
        "--window-size=1100,1600",
    ):
        options.add_argument(arg)
    d = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    downloads = tmp_path_factory.mktemp("downloads")
    d.execute_cdp_cmd(
        "Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
    d.downloads = downloads
    try:
        yield d
    finally:
        d.quit()


def _wait(condition: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def _paste(driver: Any, text: str) -> None:
    from selenium.webdriver.common.by import By

    area = driver.find_element(By.ID, "request")
    area.clear()
    driver.execute_script("arguments[0].value = arguments[1];", area, text)


def _pixel_spread(png: bytes) -> tuple[float, int]:
    """Standard deviation of the grey levels and the number of distinct colours."""
    from PIL import Image, ImageStat

    image = Image.open(io.BytesIO(png)).convert("RGB")
    grey = ImageStat.Stat(image.convert("L")).stddev[0]
    colours = image.getcolors(maxcolors=1 << 20)
    return grey, len(colours) if colours is not None else 1 << 20


@browser
def test_plan_in_the_browser(server: str, driver: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    driver.get(server + "/")
    assert driver.title == "alloc-planner"
    _paste(driver, json.dumps(TEN, indent=2))
    driver.find_element(By.ID, "plan").click()
    _wait(lambda: driver.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "planned")
    rects = driver.find_elements(By.CSS_SELECTOR, "#map svg rect.buffer")
    assert len(rects) == len(TEN["buffers"])
    plan = planner.plan(TEN)
    ids = sorted(r.get_attribute("data-id") for r in rects)
    assert ids == sorted(p.id for p in plan.placements)
    stats = driver.find_element(By.ID, "stats").text
    assert f"arena {plan.arena_bytes} B" in stats
    assert f"lower bound {plan.lower_bound} B" in stats
    notes = driver.find_elements(By.CSS_SELECTOR, "#diagnostics li")
    assert [n.text.split(" ")[1].rstrip(":") for n in notes] == [d.code for d in plan.diagnostics]

    png = driver.find_element(By.ID, "map").screenshot_as_png
    shot = Path(os.environ.get("WEB_SCREENSHOT", tmp_path / "map.png"))
    shot.write_bytes(png)
    grey, colours = _pixel_spread(png)
    assert grey > 20  # a blank or one-colour map has none
    assert colours > 20  # a fill per buffer, lines and text

    driver.find_element(By.ID, "dl-cuda").click()
    cuda = _wait(lambda: next(iter(driver.downloads.glob("*.cu")), None))
    request = parse_request(TEN)
    _wait(lambda: cuda.read_text() == emit_cuda(request, plan))
    driver.find_element(By.ID, "dl-plan").click()
    saved = _wait(lambda: next(iter(driver.downloads.glob("*.plan.json")), None))
    _wait(lambda: saved.stat().st_size > 0)
    assert planner.Plan.model_validate_json(saved.read_text()) == plan
    driver.find_element(By.ID, "dl-svg").click()
    svg = _wait(lambda: next(iter(driver.downloads.glob("*.svg")), None))
    _wait(lambda: svg.stat().st_size > 0)
    assert ET.fromstring(svg.read_text()).tag.endswith("svg")


@browser
def test_bad_request_shows_the_field(server: str, driver: Any) -> None:
    from selenium.webdriver.common.by import By

    driver.get(server + "/")
    bad = {**TEN, "buffers": [{**TEN["buffers"][0], "end": 0}]}
    _paste(driver, json.dumps(bad))
    driver.find_element(By.ID, "plan").click()
    _wait(lambda: driver.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "error")
    errors = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#errors li")]
    assert any(
        e.startswith("buffers.0.end: end (0) must be greater than start (0)") for e in errors
    )


@browser
def test_example_and_upload(server: str, driver: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    driver.get(server + "/")
    driver.find_element(By.ID, "example").click()
    _wait(lambda: driver.find_element(By.ID, "request").get_attribute("value"))
    assert json.loads(driver.find_element(By.ID, "request").get_attribute("value")) == json.loads(
        (STATIC / "example.json").read_text()
    )
    upload = tmp_path / "spill.json"
    upload.write_text((Path(__file__).parent / "golden" / "spill.json").read_text())
    driver.find_element(By.ID, "file").send_keys(str(upload))
    _wait(lambda: "attention_spill" in driver.find_element(By.ID, "request").get_attribute("value"))
    driver.find_element(By.ID, "plan").click()
    _wait(lambda: driver.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "planned")
    rects = driver.find_elements(By.CSS_SELECTOR, "#map svg rect.buffer")
    memory = sorted(r.get_attribute("data-memory") for r in rects)
    assert memory == ["global", "shared", "shared", "shared"]
    assert "1 buffer, 16384 B global workspace" in driver.find_element(By.ID, "stats").text


def test_the_page_posts_json() -> None:
    # The service refuses any other content type (415), so every POST of the page names it.
    script = (STATIC / "app.js").read_text(encoding="utf-8")
    calls = re.findall(r"fetch\((.*?)\);", script, re.S)
    posts = [call for call in calls if 'method: "POST"' in call]
    assert len(posts) == 2, posts
    assert all('headers: { "content-type": "application/json" }' in p for p in posts)
