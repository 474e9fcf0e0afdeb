"""The web page: its routes in-process, and end to end in headless Chromium (skipped cleanly
when Chromium, its driver or selenium is missing)."""

from __future__ import annotations

import json
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from fastapi.testclient import TestClient

import planner
from planner.api import create_app
from planner.catalog import is_request_file
from planner.core.io import parse_request
from planner.core.targets import TARGETS
from planner.emit import emit_cuda, emit_mlir, emit_svg
from tests.support.browser import (
    JS_TABLE,
    attribute,
    browser,
    downloads,
    driver,
    lifetime,
    open_page,
    paste,
    pixel_spread,
    plan_on_page,
    random_data,
    screenshot,
    server,
    state,
    wait_for,
)
from tests.support.paths import ROOT, TESTS
from tests.support.samples import TEN

if TYPE_CHECKING:
    from selenium.webdriver import Chrome

__all__ = ["downloads", "driver", "server"]  # fixtures the browser tests use by name

STATIC = ROOT / "api" / "static"
EXAMPLES = ROOT / "examples"

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
    assert client.get("/static/example.json").status_code == 404  # examples: GET /examples
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


# --- the shipped examples ----------------------------------------------------------------------


def _example_files() -> list[Path]:
    return sorted(p for p in EXAMPLES.glob("*.json") if is_request_file(p.name))


def test_examples_are_listed_and_served_as_shipped(client: TestClient) -> None:
    listed = client.get("/examples")
    assert listed.status_code == 200
    files = _example_files()
    assert len(files) >= 10
    assert [e["name"] for e in listed.json()] == [p.stem for p in files]
    for entry, path in zip(listed.json(), files, strict=True):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert entry == {
            "name": path.stem,
            "title": data["name"],
            "buffers": len(data["buffers"]),
            "target": data.get("target"),
            "sync": data.get("options", {}).get("sync", "insert"),
        }
        served = client.get(f"/examples/{path.stem}")
        assert served.status_code == 200
        assert served.headers["content-type"] == "application/json"
        assert served.content == path.read_bytes()
    # An expectation beside a request is no request.
    assert (EXAMPLES / "too_big_for_sm75.expect.json").exists()
    assert "too_big_for_sm75.expect" not in {e["name"] for e in listed.json()}


def test_a_served_example_plans(client: TestClient) -> None:
    text = client.get("/examples/tvm_tiled_gemm").content
    plan = planner.plan(text)
    assert planner.validate(text, plan).valid
    assert plan.status == "optimal"


@pytest.mark.parametrize(
    ("name", "status", "kind"),
    [
        ("too_big_for_sm75.expect", 404, "not_found"),
        ("no_such_kernel", 404, "not_found"),
        ("README", 404, "not_found"),  # examples/README.md: no request
        ("a b", 422, "string_pattern_mismatch"),
        ("x" * 201, 422, "string_too_long"),
    ],
)
def test_an_unknown_example_is_refused(
    client: TestClient, name: str, status: int, kind: str
) -> None:
    response = client.get(f"/examples/{name}")
    assert response.status_code == status
    detail = response.json()["detail"]
    assert detail[0]["type"] == kind


def test_openapi_documents_the_examples(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    listing = spec["paths"]["/examples"]["get"]["responses"]["200"]
    schema = listing["content"]["application/json"]["schema"]
    assert schema["type"] == "array"
    assert schema["items"] == {"$ref": "#/components/schemas/Example"}
    example = spec["components"]["schemas"]["Example"]
    assert set(example["properties"]) == {"name", "title", "buffers", "target", "sync"}
    assert all(prop.get("description") for prop in example["properties"].values())
    one = spec["paths"]["/examples/{name}"]["get"]
    assert one["parameters"][0]["description"]
    answer = one["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/PlanRequest"}
    for status in ("404", "422"):
        refused = one["responses"][status]["content"]["application/json"]["schema"]
        assert refused == {"$ref": "#/components/schemas/ErrorResponse"}
    assert "HTTPValidationError" not in spec["components"]["schemas"]


# --- end to end in a real browser --------------------------------------------------------

_wait = wait_for


@browser
def test_plan_in_the_browser(server: str, driver: Chrome, downloads: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    open_page(driver, server)
    assert driver.title == "alloc-planner"
    paste(driver, json.dumps(TEN, indent=2))
    driver.find_element(By.ID, "plan").click()
    _wait(lambda: state(driver) == "planned")
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

    png = screenshot(driver, "ten", tmp_path)
    grey, colours = pixel_spread(png)
    assert grey > 20  # a blank or one-colour page has none
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

    open_page(driver, server)
    bad = {**TEN, "buffers": [{**TEN["buffers"][0], "end": 0}]}
    paste(driver, json.dumps(bad))
    driver.find_element(By.ID, "plan").click()
    _wait(lambda: state(driver) == "error")
    errors = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#errors li")]
    assert any(
        e.startswith("buffers.0.end: end (0) must be greater than start (0)") for e in errors
    )


@browser
@pytest.mark.parametrize(
    "text",
    ['{\n  "buffers": [\n    {"id": "a",, "size": 4}', '{"buffers": [', "[1, 2,]", '{"a": 1}\n}'],
)
def test_a_syntax_error_names_line_and_column_as_the_service_does(
    server: str, driver: Chrome, text: str
) -> None:
    from selenium.webdriver.common.by import By

    answer = httpx.post(f"{server}/plan", content=text.encode(), headers=JSON, timeout=30)
    assert answer.status_code == 422
    (want,) = answer.json()["detail"]
    assert re.search(r"at line \d+ column \d+$", want["msg"]), want
    open_page(driver, server)
    paste(driver, text)
    driver.find_element(By.ID, "plan").click()
    _wait(lambda: state(driver) == "error")
    assert [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#errors li")] == [want["msg"]]
    # The caret stands where the message points.
    line, column = map(int, re.findall(r"line (\d+) column (\d+)", want["msg"])[0])
    caret = driver.execute_script("return document.getElementById('request').selectionStart")
    assert caret == sum(len(t) + 1 for t in text.split("\n")[: line - 1]) + column - 1


@browser
def test_a_control_on_malformed_json_names_line_and_column(server: str, driver: Chrome) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    open_page(driver, server)
    paste(driver, '{\n  "buffers": [\n    {"id": "a",, "size": 4}]}')
    Select(driver.find_element(By.ID, "sync")).select_by_value("none")
    (error,) = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#errors li")]
    assert error.startswith("malformed JSON: ")
    assert error.endswith("at line 3 column 16")
    # The text is left as it was: nothing is rewritten from a request that does not parse.
    assert ",," in attribute(driver.find_element(By.ID, "request"), "value")


@browser
def test_examples_load_and_plan(server: str, driver: Chrome, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    open_page(driver, server)
    choices = Select(driver.find_element(By.ID, "examples"))
    names = [attribute(o, "value") for o in choices.options if attribute(o, "value")]
    assert names == [p.stem for p in _example_files()]
    choices.select_by_value("loop_pipelined_gemm")
    _wait(lambda: state(driver) in ("planned", "error"))
    assert state(driver) == "planned"
    path = EXAMPLES / "loop_pipelined_gemm.json"
    text = attribute(driver.find_element(By.ID, "request"), "value")
    assert text == path.read_text(encoding="utf-8")
    data = json.loads(text)
    plan = planner.plan(data)
    assert planner.validate(data, plan).valid
    assert driver.find_element(By.ID, "status").text == f"{plan.status}: arena {plan.arena_bytes} B"
    # The controls show what the example says.
    assert (
        Select(driver.find_element(By.ID, "target")).first_selected_option.get_attribute("value")
        == data["target"]
    )
    assert attribute(driver.find_element(By.ID, "capacity"), "value") == ""
    assert (
        Select(driver.find_element(By.ID, "sync")).first_selected_option.get_attribute("value")
        == data["options"]["sync"]
    )
    screenshot(driver, "example-loop-pipelined-gemm", tmp_path)


@browser
def test_upload_and_spilled_buffers(server: str, driver: Chrome, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    open_page(driver, server)
    upload = tmp_path / "spill.json"
    upload.write_text((TESTS / "golden" / "spill.json").read_text())
    driver.find_element(By.ID, "file").send_keys(str(upload))
    _wait(lambda: "attention_spill" in attribute(driver.find_element(By.ID, "request"), "value"))
    driver.find_element(By.ID, "plan").click()
    _wait(lambda: state(driver) == "planned")
    spill = json.loads(upload.read_text())
    plan = planner.plan(spill)
    assert planner.validate(spill, plan).valid
    assert sorted(driver.execute_script(JS_TABLE)) == sorted(
        [p.id, str(p.offset), str(p.size), p.memory, "[{}, {})".format(*lifetime(spill, p.id))]
        for p in plan.placements
    )
    assert "1 buffer, 16384 B global workspace" in driver.find_element(By.ID, "stats").text
    # The map draws shared memory; the spilled buffer is named under it.
    shared = sorted(p.id for p in plan.placements if p.memory == "shared")
    rects = driver.find_elements(By.CSS_SELECTOR, "#map svg rect.buffer")
    assert sorted(attribute(r, "data-id") for r in rects) == shared
    assert driver.find_element(By.ID, "spill-note").text.startswith("1 buffer spilled")


@browser
def test_controls_set_target_capacity_sync_and_solver(server: str, driver: Chrome) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    open_page(driver, server)
    targets = [attribute(o, "value") for o in Select(driver.find_element(By.ID, "target")).options]
    assert targets == ["", *TARGETS]  # the service's device table, in its order
    assert {"sm_70", "sm_90", "sm_120", "gfx942"} <= set(targets)
    solvers = [attribute(o, "value") for o in Select(driver.find_element(By.ID, "solver")).options]
    assert solvers[:3] == ["auto", "greedy", "exact"]
    assert "size/best-fit" in solvers
    syncs = [attribute(o, "value") for o in Select(driver.find_element(By.ID, "sync")).options]
    assert sorted(syncs) == ["existing", "insert", "none"]

    data = {**TEN, "capacity": None, "target": None, "options": {}}
    data = {k: v for k, v in data.items() if v is not None}
    paste(driver, json.dumps(data))

    def shown() -> dict[str, Any]:
        value: dict[str, Any] = json.loads(
            attribute(driver.find_element(By.ID, "request"), "value")
        )
        return value

    Select(driver.find_element(By.ID, "target")).select_by_value("sm_75")
    assert shown()["target"] == "sm_75"
    capacity = driver.find_element(By.ID, "capacity")
    capacity.send_keys("30000")
    driver.find_element(By.ID, "sync").click()  # leaving the field commits it
    assert shown()["capacity"] == 30000
    Select(driver.find_element(By.ID, "sync")).select_by_value("existing")
    Select(driver.find_element(By.ID, "solver")).select_by_value("size/best-fit")
    want = {**data, "target": "sm_75", "capacity": 30000}
    want["options"] = {"sync": "existing", "solver": "size/best-fit"}
    assert shown() == want
    driver.find_element(By.ID, "plan").click()
    _wait(lambda: state(driver) == "planned")
    plan = planner.plan(want)
    assert planner.validate(want, plan).valid
    assert plan.capacity == 30000
    assert plan.solver.name == "greedy:size/best-fit"
    stats = driver.find_element(By.ID, "stats").text
    assert "capacity 30000 B" in stats
    assert "solver greedy:size/best-fit" in stats
    # Emptying the capacity drops the key: the target's capacity counts again.
    capacity.clear()
    driver.execute_script(
        "arguments[0].dispatchEvent(new Event('change', {bubbles: true}))", capacity
    )
    assert "capacity" not in shown()
    Select(driver.find_element(By.ID, "target")).select_by_value("")
    assert "target" not in shown()


@browser
def test_odd_ids_find_their_rectangles(server: str, driver: Chrome) -> None:
    from selenium.webdriver.common.by import By

    ids = ['a"b', "c\\d", "e]f", "g h", "1st", "x<&>", "ü'"]
    data = {
        "name": "odd",
        "alignment": 16,
        "buffers": [
            {"id": ident, "size": 256 * (k + 1), "start": k, "end": k + 3}
            for k, ident in enumerate(ids)
        ],
        "options": {"sync": "none"},
    }
    plan_on_page(driver, server, data)
    rows = driver.find_elements(By.CSS_SELECTOR, "#placements tbody tr")
    assert len(rows) == len(ids)
    for row in rows:
        ident = row.find_elements(By.TAG_NAME, "td")[0].text
        row.click()
        lit = driver.execute_script(
            "return [...document.querySelectorAll('#map svg rect.buffer.hl')]"
            ".map((r) => r.getAttribute('data-id'))"
        )
        assert lit == [ident]


def test_the_page_posts_json() -> None:
    # The service refuses any other content type (415), so every POST of the page names it.
    script = (STATIC / "app.js").read_text(encoding="utf-8")
    calls = re.findall(r"fetch\((.*?)\);", script, re.S)
    posts = [call for call in calls if 'method: "POST"' in call]
    assert len(posts) == 2, posts
    assert all('headers: { "content-type": "application/json" }' in p for p in posts)


def test_the_page_loads_nothing_from_elsewhere() -> None:
    # The page works offline: every script, style and fetch is the service's own.
    for name in ("index.html", "app.js", "style.css"):
        text = (STATIC / name).read_text(encoding="utf-8")
        assert re.findall(r"(?:src|href)=\"(?!/|#)[^\"]*\"", text) == [], name
        assert re.findall(r"https?://(?!www\.w3\.org/2000/svg)", text) == [], name
        assert "@import" not in text


# --- the placements table, errors ------------------------------------------------------------


@browser
def test_table_sorts_by_each_column(server: str, driver: Chrome) -> None:
    from selenium.webdriver.common.by import By

    data = random_data(40, overlap=0.2, seed=7)
    plan = plan_on_page(driver, server, data)
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


def _shows_no_plan(driver: Chrome, downloads: Path) -> None:
    from selenium.webdriver.common.by import By

    assert not driver.find_element(By.ID, "result").is_displayed()
    assert driver.find_elements(By.CSS_SELECTOR, "#map svg") == []
    assert driver.execute_script(JS_TABLE) == []
    assert driver.find_elements(By.CSS_SELECTOR, "#stats tr") == []
    assert driver.find_elements(By.CSS_SELECTOR, "#peak-list li") == []
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

    plan_on_page(driver, server, TEN)
    assert driver.find_element(By.ID, "result").is_displayed()
    paste(driver, bad)
    driver.find_element(By.ID, "plan").click()
    _wait(lambda: state(driver) == "error")
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

    plan_on_page(driver, server, TEN)
    paste(driver, text)
    driver.find_element(By.ID, "plan").click()
    _wait(lambda: state(driver) == "empty")
    assert driver.find_element(By.ID, "errors").text.startswith(message)
    _shows_no_plan(driver, downloads)
