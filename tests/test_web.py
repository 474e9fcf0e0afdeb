"""The web page: its routes in-process, and end to end in headless Chromium (skipped cleanly
when Chromium, its driver or selenium is missing)."""

from __future__ import annotations

import io
import json
import os
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fastapi.testclient import TestClient

import planner
from planner.api import create_app
from planner.core.io import parse_request
from planner.emit import emit_cuda, emit_mlir, emit_svg
from planner.generate import random_request
from tests.browser import attribute, browser, downloads, driver, server, wait_for
from tests.samples import LEGEND_CASES, TEN

if TYPE_CHECKING:
    from selenium.webdriver import Chrome

__all__ = ["downloads", "driver", "server"]  # fixtures the browser tests use by name

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
    plan = planner.plan(example.content)
    assert plan.status == "optimal"
    assert planner.validate(example.content, plan).valid
    assert client.get("/static/../app.py").status_code == 404
    assert client.get("/static/index.html.bak").status_code == 404


@pytest.mark.parametrize("kind", ["cuda", "mlir", "svg"])
def test_emit_matches_the_library(client: TestClient, kind: str) -> None:
    request = parse_request(TEN)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    body = {"request": TEN, "plan": json.loads(plan.model_dump_json())}
    response = client.post(f"/emit/{kind}", json=body)
    assert response.status_code == 200, response.text
    emit = {"cuda": emit_cuda, "mlir": emit_mlir, "svg": emit_svg}[kind]
    assert response.text == emit(request, plan)


def test_emit_rejects_bad_input(client: TestClient) -> None:
    planned = planner.plan(TEN)
    assert planner.validate(TEN, planned).valid
    plan = json.loads(planned.model_dump_json())
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

_wait = wait_for


def _paste(driver: Chrome, text: str) -> None:
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
def test_plan_in_the_browser(server: str, driver: Chrome, downloads: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    driver.get(server + "/")
    assert driver.title == "alloc-planner"
    _paste(driver, json.dumps(TEN, indent=2))
    driver.find_element(By.ID, "plan").click()
    _wait(lambda: driver.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "planned")
    rects = driver.find_elements(By.CSS_SELECTOR, "#map svg rect.buffer")
    assert len(rects) == len(TEN["buffers"])
    plan = planner.plan(TEN)
    assert planner.validate(TEN, plan).valid
    ids = sorted(attribute(r, "data-id") for r in rects)
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
    cuda = _wait(lambda: next(iter(downloads.glob("*.cu")), None))
    request = parse_request(TEN)
    _wait(lambda: cuda.read_text() == emit_cuda(request, plan))
    driver.find_element(By.ID, "dl-plan").click()
    saved = _wait(lambda: next(iter(downloads.glob("*.plan.json")), None))
    _wait(lambda: saved.stat().st_size > 0)
    assert planner.Plan.model_validate_json(saved.read_text()) == plan
    driver.find_element(By.ID, "dl-svg").click()
    svg = _wait(lambda: next(iter(downloads.glob("*.svg")), None))
    _wait(lambda: svg.stat().st_size > 0)
    assert ET.fromstring(svg.read_text()).tag.endswith("svg")


@browser
def test_bad_request_shows_the_field(server: str, driver: Chrome) -> None:
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
def test_example_and_upload(server: str, driver: Chrome, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    driver.get(server + "/")
    driver.find_element(By.ID, "example").click()
    _wait(lambda: driver.find_element(By.ID, "request").get_attribute("value"))
    assert json.loads(attribute(driver.find_element(By.ID, "request"), "value")) == json.loads(
        (STATIC / "example.json").read_text()
    )
    upload = tmp_path / "spill.json"
    upload.write_text((Path(__file__).parent / "golden" / "spill.json").read_text())
    driver.find_element(By.ID, "file").send_keys(str(upload))
    _wait(lambda: "attention_spill" in attribute(driver.find_element(By.ID, "request"), "value"))
    driver.find_element(By.ID, "plan").click()
    _wait(lambda: driver.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "planned")
    rects = driver.find_elements(By.CSS_SELECTOR, "#map svg rect.buffer")
    memory = sorted(attribute(r, "data-memory") for r in rects)
    assert memory == ["global", "shared", "shared", "shared"]
    spill = json.loads(upload.read_text())
    plan = planner.plan(spill)
    assert planner.validate(spill, plan).valid
    assert sorted(driver.execute_script(JS_TABLE)) == sorted(
        [p.id, str(p.offset), str(p.size), p.memory, "[{}, {})".format(*_lifetime(spill, p.id))]
        for p in plan.placements
    )
    assert "1 buffer, 16384 B global workspace" in driver.find_element(By.ID, "stats").text


def test_the_page_posts_json() -> None:
    # The service refuses any other content type (415), so every POST of the page names it.
    script = (STATIC / "app.js").read_text(encoding="utf-8")
    calls = re.findall(r"fetch\((.*?)\);", script, re.S)
    posts = [call for call in calls if 'method: "POST"' in call]
    assert len(posts) == 2, posts
    assert all('headers: { "content-type": "application/json" }' in p for p in posts)


# --- the placements table, the map's zoom, labels, legend, errors -------------------------

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

JS_TABLE = """
return [...document.querySelectorAll('#placements tbody tr')].map(
  (r) => [...r.cells].map((c) => c.textContent));
"""


def _state(driver: Chrome) -> str:
    from selenium.webdriver.common.by import By

    return attribute(driver.find_element(By.TAG_NAME, "body"), "data-state")


def _plan_on_page(driver: Chrome, server: str, data: dict[str, Any]) -> planner.Plan:
    """Plan ``data`` on a fresh page; the plan shown is the library's, and valid."""
    from selenium.webdriver.common.by import By

    driver.get(server + "/")
    _paste(driver, json.dumps(data))
    driver.find_element(By.ID, "plan").click()
    _wait(lambda: _state(driver) in ("planned", "error"))
    assert _state(driver) == "planned", driver.find_element(By.ID, "errors").text
    plan = planner.plan(data)
    assert planner.validate(data, plan).valid
    want = sorted(
        [p.id, str(p.offset), str(p.size), p.memory, "[{}, {})".format(*_lifetime(data, p.id))]
        for p in plan.placements
    )
    assert sorted(driver.execute_script(JS_TABLE)) == want
    return plan


def _lifetime(data: dict[str, Any], ident: str) -> tuple[int, int]:
    b = next(b for b in data["buffers"] if b["id"] == ident)
    return b["start"], b["end"]


def _overlaps(boxes: list[list[Any]]) -> list[tuple[str, str]]:
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


def _request(n: int, **kw: Any) -> dict[str, Any]:
    data: dict[str, Any] = random_request(n, **kw).model_dump(mode="json", exclude_none=True)
    return data


@browser
def test_table_sorts_by_each_column(server: str, driver: Chrome) -> None:
    from selenium.webdriver.common.by import By

    data = _request(40, overlap=0.2, seed=7)
    plan = _plan_on_page(driver, server, data)
    assert driver.find_element(By.ID, "count").text == f"({len(plan.placements)})"

    def natural(ident: str) -> tuple[Any, ...]:
        return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", ident))

    keys: dict[str, Any] = {
        "id": lambda r: natural(r[0]),  # b2 before b10
        "offset": lambda r: int(r[1]),
        "size": lambda r: int(r[2]),
        "memory": lambda r: r[3],
        "live": lambda r: tuple(int(v) for v in re.findall(r"\d+", r[4])),
    }
    for key, sort_key in keys.items():
        header = driver.find_element(By.CSS_SELECTOR, f'#placements th[data-key="{key}"]')
        header.find_element(By.TAG_NAME, "button").click()
        rows = driver.execute_script(JS_TABLE)
        assert [sort_key(r) for r in rows] == sorted(sort_key(r) for r in rows), key
        assert header.get_attribute("aria-sort") == "ascending"
        header.find_element(By.TAG_NAME, "button").click()
        rows = driver.execute_script(JS_TABLE)
        assert [sort_key(r) for r in rows] == sorted((sort_key(r) for r in rows), reverse=True), key
        assert header.get_attribute("aria-sort") == "descending"
        others = driver.find_elements(By.CSS_SELECTOR, '#placements th[aria-sort="none"]')
        assert len(others) == len(keys) - 1
    # The sizes have several digit counts, so text order would differ from numeric order.
    sizes = sorted({p.size for p in plan.placements})
    assert len(str(sizes[0])) < len(str(sizes[-1]))


def _view_box(driver: Chrome) -> list[float]:
    from selenium.webdriver.common.by import By

    box: str = driver.find_element(By.CSS_SELECTOR, "#map svg").get_dom_attribute("viewBox")
    return [float(v) for v in box.split()]


def _labels(driver: Chrome) -> int:
    count: int = driver.execute_script(
        "return document.querySelectorAll('#map svg text.label').length"
    )
    return count


@browser
def test_500_buffers_zoom_pan_and_reset(server: str, driver: Chrome) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    data = _request(500, overlap=0.05, seed=1)
    _plan_on_page(driver, server, data)
    assert len(driver.find_elements(By.CSS_SELECTOR, "#map svg rect.buffer")) == 500
    boxes = driver.execute_script(JS_TEXT_BOXES)
    assert len(boxes) > 20  # ticks, title, notes, legend and the labels that fit
    assert _overlaps(boxes) == []
    base = _view_box(driver)
    labels = _labels(driver)

    driver.find_element(By.ID, "zoom-in").click()
    zoomed = _view_box(driver)
    assert zoomed[2] == pytest.approx(base[2] / 2)
    assert zoomed[3] == pytest.approx(base[3] / 2)
    assert driver.find_element(By.ID, "zoom-level").text == "200 %"
    # The wheel zooms in further about the pointer.
    svg = driver.find_element(By.CSS_SELECTOR, "#map svg")
    driver.execute_script(
        """const r = arguments[0].getBoundingClientRect();
        arguments[0].dispatchEvent(new WheelEvent('wheel', {deltaY: -400, bubbles: true,
          cancelable: true, clientX: r.left + r.width / 2, clientY: r.top + r.height / 2}));""",
        svg,
    )
    wheeled = _view_box(driver)
    assert wheeled[2] < zoomed[2] / 2
    # More buffers are wide enough on screen to carry their names, and none overprint.
    assert _labels(driver) > labels
    assert _overlaps(driver.execute_script(JS_TEXT_BOXES)) == []
    # Dragging to the right shows what lies to the left.
    ActionChains(driver).move_to_element(svg).click_and_hold().move_by_offset(
        120, 0
    ).release().perform()
    panned = _view_box(driver)
    assert panned[0] < wheeled[0]
    assert panned[2] == pytest.approx(wheeled[2])

    driver.find_element(By.ID, "zoom-reset").click()
    assert _view_box(driver) == pytest.approx(base)
    assert _labels(driver) == labels
    assert driver.find_element(By.ID, "zoom-level").text == "100 %"

    png = driver.find_element(By.ID, "map").screenshot_as_png
    grey, colours = _pixel_spread(png)
    assert grey > 5
    assert colours > 100  # a fill per buffer

    # A click on a row zooms onto its buffer, a sliver at full view, until it carries a name.
    narrowest = driver.execute_script(
        """const rects = [...document.querySelectorAll('#map svg rect.buffer')]
          .filter((r) => r.height.baseVal.value >= 1);
        rects.sort((a, b) => a.width.baseVal.value - b.width.baseVal.value);
        return rects[0].dataset.id;"""
    )
    assert narrowest not in driver.execute_script(
        "return [...document.querySelectorAll('#map text.label')].map((t) => t.textContent)"
    )
    driver.find_element(By.CSS_SELECTOR, f'#placements tr[data-id="{narrowest}"]').click()
    x, y, w, h = _view_box(driver)
    assert w < base[2]
    rect = driver.find_element(By.CSS_SELECTOR, f'#map svg rect[data-id="{narrowest}"]')
    assert "hl" in attribute(rect, "class").split()
    rx, ry, rw, rh = (float(rect.get_dom_attribute(k)) for k in ("x", "y", "width", "height"))
    assert x < rx + rw / 2 < x + w  # centred on the buffer
    assert y < ry + rh / 2 < y + h
    named = driver.execute_script(
        "return [...document.querySelectorAll('#map text.label')].map((t) => t.textContent)"
    )
    assert narrowest in named
    assert _overlaps(driver.execute_script(JS_TEXT_BOXES)) == []


@browser
@pytest.mark.parametrize("extra", [0, 16, 256])
def test_capacity_and_lower_bound_labels_do_not_overlap(
    server: str, driver: Chrome, extra: int
) -> None:
    plain = planner.plan(TEN)
    assert planner.validate(TEN, plain).valid
    bound = plain.lower_bound
    data = {**TEN, "capacity": bound + extra}
    plan = _plan_on_page(driver, server, data)
    assert plan.capacity == bound + extra
    boxes = driver.execute_script(JS_TEXT_BOXES)
    notes = [b for b in boxes if b[5] == "note"]
    assert len(notes) == (1 if extra == 0 else 2)
    assert all(("capacity" in b[0]) != ("lower bound" in b[0]) for b in notes) == (extra > 0)
    assert _overlaps(boxes) == []


@browser
@pytest.mark.parametrize("case", sorted(LEGEND_CASES))
def test_legend_matches_what_is_drawn(server: str, driver: Chrome, case: str) -> None:
    data, want = LEGEND_CASES[case]
    _plan_on_page(driver, server, data)
    legend, drawn = driver.execute_script(
        """const svg = document.querySelector('#map svg');
        const legend = [...svg.querySelectorAll('.legend-item')].map((g) => g.dataset.kind);
        const drawn = new Set();
        for (const el of svg.querySelectorAll('line, path')) {
          if (el.closest('.legend')) continue;
          const c = [...el.classList];
          if (c[0] === 'barrier') drawn.add('barrier-' + c[1]);
          else if (['capacity', 'lower-bound', 'live'].includes(c[0])) drawn.add(c[0]);
        }
        return [legend, [...drawn]];"""
    )
    assert set(legend) == set(drawn) == want
    assert len(legend) == len(set(legend))


def _shows_no_plan(driver: Chrome, downloads: Path) -> None:
    from selenium.webdriver.common.by import By

    assert not driver.find_element(By.ID, "result").is_displayed()
    assert driver.find_elements(By.CSS_SELECTOR, "#map svg") == []
    assert driver.execute_script(JS_TABLE) == []
    assert driver.find_elements(By.CSS_SELECTOR, "#stats tr") == []
    before = set(downloads.iterdir())
    driver.execute_script("document.getElementById('dl-plan').click()")
    time.sleep(0.5)
    assert set(downloads.iterdir()) == before  # nothing left to download


@browser
@pytest.mark.parametrize(
    "bad",
    ['{"buffers": [{"id": "a", "size": -1, "start": 0, "end": 2}]}', '{"buffers": ['],
)
def test_an_error_after_a_plan_clears_it(
    server: str, driver: Chrome, downloads: Path, bad: str
) -> None:
    from selenium.webdriver.common.by import By

    _plan_on_page(driver, server, TEN)
    assert driver.find_element(By.ID, "result").is_displayed()
    _paste(driver, bad)
    driver.find_element(By.ID, "plan").click()
    _wait(lambda: _state(driver) == "error")
    errors = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#errors li")]
    assert errors
    assert errors[0].startswith("buffers.0.size:" if "-1" in bad else "malformed JSON")
    _shows_no_plan(driver, downloads)


@browser
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "The request is empty"),
        ("  \n ", "The request is empty"),
        ('{"name": "k", "buffers": []}', "The request has no buffers"),
    ],
)
def test_an_empty_request_says_so(
    server: str, driver: Chrome, downloads: Path, text: str, message: str
) -> None:
    from selenium.webdriver.common.by import By

    _plan_on_page(driver, server, TEN)
    _paste(driver, text)
    driver.find_element(By.ID, "plan").click()
    _wait(lambda: _state(driver) == "empty")
    assert driver.find_element(By.ID, "errors").text.startswith(message)
    _shows_no_plan(driver, downloads)
