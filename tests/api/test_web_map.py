"""The page's memory map in headless Chromium: the axis to the arena in KiB, the peak and the
buffers live there, the crosshair, zoom along program points with the axes kept, barriers by
kind, barrier-extended lifetimes, alias links, and infeasible plans. Every map is checked
for overprinting text, and screenshots go to ``$WEB_SCREENSHOTS`` when set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import planner
from tests.support.browser import (
    JS_TABLE,
    JS_TEXT_BOXES,
    attribute,
    browser,
    downloads,
    driver,
    open_page,
    overlaps,
    plan_on_page,
    random_data,
    screenshot,
    server,
    state,
    wait_for,
)
from tests.support.paths import ROOT
from tests.support.samples import TEN

if TYPE_CHECKING:
    from selenium.webdriver import Chrome

__all__ = ["downloads", "driver", "server"]  # fixtures the browser tests use by name

EXAMPLES = ROOT / "examples"


def _example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    return data


# --- what the map should show, worked out here from the request and its plan ----------------


class Expected:
    """Live and held bytes per point of a request without access patterns, ranges or aliases:
    a buffer holds its bytes from its start to the first barrier of the plan after its last
    point (docs/design.md, Barrier-extended lifetimes), to the end when none follows (unless
    the caller synchronizes, sync "none")."""

    def __init__(self, data: dict[str, Any], plan: planner.Plan) -> None:
        b = plan.barriers
        points = sorted(set(b.existing) | set(b.inserted) | set(b.required))
        sync = data.get("options", {}).get("sync", "insert")
        self.horizon = max([x["end"] for x in data["buffers"]] + points + [1])
        sizes = {p.id: p.size for p in plan.placements if p.memory == "shared"}
        self.order = [p.id for p in plan.placements]
        self.spans: dict[str, tuple[int, int, int, int]] = {}  # id -> start, end, held, size
        for x in data["buffers"]:
            if x["id"] not in sizes:
                continue
            after = [p for p in points if p > x["end"] - 1]
            if after:
                held = max(x["end"], after[0])
            else:
                held = x["end"] if sync == "none" else self.horizon
            self.spans[x["id"]] = (x["start"], x["end"], held, sizes[x["id"]])

    def live(self, point: int) -> int:
        return sum(size for s, e, _, size in self.spans.values() if s <= point < e)

    def held(self, point: int) -> int:
        return sum(size for s, _, h, size in self.spans.values() if s <= point < h)

    def holding(self, point: int) -> list[str]:
        """The buffers holding bytes at ``point``, largest first, then in plan order."""
        ids = [i for i, (s, _, h, _) in self.spans.items() if s <= point < h]
        return sorted(ids, key=lambda i: (-self.spans[i][3], self.order.index(i)))

    def peak(self) -> tuple[int, int]:
        """The peak of held bytes and the first point that reaches it."""
        values = [self.held(p) for p in range(self.horizon)]
        top = max(values)
        return top, values.index(top)

    def extended(self) -> set[str]:
        return {i for i, (_, e, h, _) in self.spans.items() if h > e}


# The peak runs over [0, 4) across point 2, where one buffer ends and an equal one starts.
ADJACENT: dict[str, Any] = {
    "name": "adjacent",
    "alignment": 16,
    "buffers": [
        {"id": "a", "size": 1024, "start": 0, "end": 2},
        {"id": "b", "size": 1024, "start": 2, "end": 4},
        {"id": "c", "size": 512, "start": 0, "end": 4},
        {"id": "d", "size": 256, "start": 4, "end": 6},
    ],
    "options": {"sync": "none"},
}


def _texts(driver: Chrome, selector: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, selector)]


def _list_ids(driver: Chrome, list_id: str) -> list[str]:
    return _texts(driver, f"#{list_id} li code")


def _svg_data(driver: Chrome) -> dict[str, float]:
    """The map's view, read in one script: the page may redraw the map between two reads."""
    keys = ("x0", "x1", "ymax")
    values = driver.execute_script(
        """const svg = document.querySelector('#map svg');
        return arguments[0].map(k => svg.getAttribute('data-' + k));""",
        list(keys),
    )
    assert None not in values, f"the map has no view: {values}"
    return {k: float(v) for k, v in zip(keys, values, strict=True)}


def _changed(driver: Chrome, before: dict[str, float]) -> dict[str, float] | None:
    """The map's view once it differs from ``before``, else None."""
    now = _svg_data(driver)
    return now if now != before else None


def _point_to(driver: Chrome, point: int) -> None:
    """Move the pointer over the middle of ``point`` on the map."""
    driver.execute_script(
        """const svg = document.querySelector('#map svg');
        const r = svg.querySelector('rect.plot').getBoundingClientRect();
        const x0 = +svg.dataset.x0, x1 = +svg.dataset.x1;
        const x = r.left + ((arguments[0] + 0.5 - x0) / (x1 - x0)) * r.width;
        svg.dispatchEvent(new PointerEvent('pointermove',
          {clientX: x, clientY: r.top + r.height / 2, bubbles: true}));""",
        point,
    )


JS_DRAWN_KINDS = """
const svg = document.querySelector('#map svg');
const kinds = new Set();
const marks = {'rect.buffer': 'buffer', 'rect.held': 'held', 'path.alias': 'alias',
  'path.live': 'live', 'path.held-curve': 'held-curve', 'rect.peak': 'peak',
  'line.capacity': 'capacity', 'line.lower-bound': 'lower-bound',
  'rect.over-capacity': 'over-capacity', 'rect.certificate-point': 'certificate',
  'rect.loop': 'loop'};
for (const [selector, kind] of Object.entries(marks)) {
  if (svg.querySelector(selector)) kinds.add(kind);
}
for (const line of svg.querySelectorAll('line.barrier')) kinds.add('barrier-' + line.classList[1]);
const legend = [...document.querySelectorAll('#legend li')].map((li) => li.dataset.kind);
return [[...kinds], legend];
"""


# --- the peak, the crosshair, barrier-extended lifetimes -------------------------------------


@browser
@pytest.mark.parametrize(
    ("case", "data"),
    [
        ("ten-existing", {**TEN, "options": {"sync": "existing"}}),
        ("ten-insert", TEN),
        ("random-500", random_data(500, overlap=0.05, seed=1, sync="insert")),
        ("one-run", ADJACENT),
    ],
)
def test_peak_lists_the_buffers_held_there_by_size(
    server: str, driver: Chrome, tmp_path: Path, case: str, data: dict[str, Any]
) -> None:
    plan = plan_on_page(driver, server, data)
    expected = Expected(data, plan)
    peak, at = expected.peak()
    # What the arena must hold at once: no less than the bound, no more than the arena.
    assert plan.lower_bound <= peak <= plan.arena_bytes
    if data["options"]["sync"] == "existing":
        assert peak == plan.lower_bound  # the bound is this peak under existing barriers
    summary = _texts(driver, "#peak-summary")[0]
    assert f"({peak} B) held at point" in summary
    assert f"at point {at}, largest first" in summary
    assert _list_ids(driver, "peak-list") == expected.holding(at)
    sizes = _texts(driver, "#peak-list li .size")
    assert len(sizes) == len(expected.holding(at))
    starts = driver.execute_script(
        "return [...document.querySelectorAll('#map svg rect.peak')].map((r) => +r.dataset.start)"
    )
    assert at in starts
    assert all(expected.held(p) == peak for p in starts)
    # Each shaded span is a whole run of peak points: the points beside it fall short.
    spans = driver.execute_script(
        "return [...document.querySelectorAll('#map svg rect.peak')]"
        ".map((r) => [+r.dataset.start, +r.dataset.end])"
    )
    for start, end in spans:
        assert all(expected.held(p) == peak for p in range(start, end))
        assert start == 0 or expected.held(start - 1) < peak
        assert end == expected.horizon or expected.held(end) < peak
    screenshot(driver, f"peak-{case}", tmp_path)


@browser
def test_crosshair_shows_live_bytes_and_the_buffers_at_a_point(
    server: str, driver: Chrome, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    data = {**TEN, "options": {"sync": "existing"}}
    plan = plan_on_page(driver, server, data)
    expected = Expected(data, plan)
    readout = driver.find_element(By.ID, "readout")
    for point in range(expected.horizon):
        _point_to(driver, point)
        assert attribute(readout, "data-point") == str(point)
        assert attribute(readout, "data-live") == str(expected.live(point))
        assert attribute(readout, "data-held") == str(expected.held(point))
        assert readout.text.startswith(f"point {point}: {expected.live(point)} B live")
        assert driver.find_element(By.ID, "point-no").text == str(point)
        assert _list_ids(driver, "point-list") == expected.holding(point), point
        held = _texts(driver, "#point-list li[data-held='true'] code")
        assert held == [
            i for i in expected.holding(point) if expected.spans[i][1] <= point
        ]  # past their end, held for a barrier
    # The vertical line stands on the point, the horizontal one at its held bytes.
    _point_to(driver, 4)
    crosshair = driver.find_element(By.CSS_SELECTOR, "#map svg g.crosshair")
    assert attribute(crosshair, "visibility") == "visible"
    x = float(attribute(crosshair.find_element(By.CSS_SELECTOR, ".cursor-x"), "x1"))
    y = float(attribute(crosshair.find_element(By.CSS_SELECTOR, ".cursor-y"), "y1"))
    geometry = driver.execute_script(
        """const p = document.querySelector('#map svg rect.plot');
        return [p.x.baseVal.value, p.y.baseVal.value, p.width.baseVal.value,
                p.height.baseVal.value];"""
    )
    left, top, width, height = geometry
    view = _svg_data(driver)
    assert x == pytest.approx(left + (4.5 - view["x0"]) / (view["x1"] - view["x0"]) * width, abs=1)
    assert y == pytest.approx(top + height - expected.held(4) / view["ymax"] * height, abs=1)
    screenshot(driver, "crosshair-ten", tmp_path)


@browser
def test_the_keyboard_moves_the_crosshair_and_zooms(server: str, driver: Chrome) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    data = {**TEN, "options": {"sync": "existing"}}
    plan = plan_on_page(driver, server, data)
    expected = Expected(data, plan)
    _point_to(driver, 2)
    the_map = driver.find_element(By.ID, "map")
    readout = driver.find_element(By.ID, "readout")
    the_map.send_keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)
    assert attribute(readout, "data-point") == "4"
    the_map.send_keys(Keys.ARROW_LEFT)
    assert attribute(readout, "data-point") == "3"
    assert attribute(readout, "data-held") == str(expected.held(3))
    assert _list_ids(driver, "point-list") == expected.holding(3)
    the_map.send_keys(Keys.ARROW_LEFT * 10)  # stops at the first point
    assert attribute(readout, "data-point") == "0"
    the_map.send_keys("+")
    view = _svg_data(driver)
    assert view["x1"] - view["x0"] == pytest.approx(expected.horizon / 2, abs=0.02)
    assert view["x0"] <= 0.5 <= view["x1"]  # about the crosshair's point
    the_map.send_keys(Keys.ARROW_RIGHT * 7)  # past the view's right edge: the view follows
    view = _svg_data(driver)
    assert view["x0"] <= 7 < 8 <= view["x1"]
    the_map.send_keys("0")
    assert _svg_data(driver)["x1"] == expected.horizon


@browser
def test_held_lifetimes_are_drawn_after_the_live_ones(server: str, driver: Chrome) -> None:
    from selenium.webdriver.common.by import By

    data = {**TEN, "options": {"sync": "existing"}}
    plan = plan_on_page(driver, server, data)
    expected = Expected(data, plan)
    assert expected.extended()  # the request has buffers waiting for a barrier
    tails = driver.find_elements(By.CSS_SELECTOR, "#map svg rect.held")
    assert {attribute(t, "data-id") for t in tails} == expected.extended()
    for tail in tails:
        ident = attribute(tail, "data-id")
        body = next(
            r
            for r in driver.find_elements(By.CSS_SELECTOR, "#map svg rect.buffer")
            if attribute(r, "data-id") == ident
        )
        right = float(attribute(body, "x")) + float(attribute(body, "width"))
        assert float(attribute(tail, "x")) == pytest.approx(right, abs=0.02)
        assert attribute(tail, "y") == attribute(body, "y")


# --- the axes and zoom ---------------------------------------------------------------------


@browser
def test_the_axis_runs_to_the_arena_in_kib(server: str, driver: Chrome, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    data = _example("loop_pipelined_gemm")  # 64 KiB arena, 8 KiB stages, 227 KiB capacity
    plan = plan_on_page(driver, server, data)
    assert plan.capacity is not None
    ymax = _svg_data(driver)["ymax"]
    assert plan.arena_bytes <= ymax <= 1.3 * plan.arena_bytes < plan.capacity
    ticks = _texts(driver, "#map svg g.yticks text")
    assert ticks[0] == "0 B"
    assert all(t.endswith(" KiB") for t in ticks[1:]), ticks
    assert "64 KiB" in ticks
    # The capacity, off this axis, is named at its top.
    notes = driver.execute_script(
        "return [...document.querySelectorAll('#map svg text.note')]"
        ".map((t) => [...t.children].map((line) => line.textContent).join(' '))"
    )
    assert "capacity, above 227 KiB" in notes
    assert driver.find_elements(By.CSS_SELECTOR, "#map svg line.capacity") == []
    # An 8 KiB stage buffer is a band tall enough to carry its name.
    stage = next(
        r
        for r in driver.find_elements(By.CSS_SELECTOR, "#map svg rect.buffer")
        if attribute(r, "data-id") == "A_s0"
    )
    assert float(attribute(stage, "height")) >= 40
    assert "A_s0" in _texts(driver, "#map svg text.label")
    screenshot(driver, "axis-loop-pipelined-gemm", tmp_path)


def _y_axis(driver: Chrome) -> list[tuple[str, str]]:
    return driver.execute_script(  # type: ignore[no-any-return]
        "return [...document.querySelectorAll('#map svg g.yticks text')]"
        ".map((t) => [t.textContent, t.getAttribute('y')])"
    )


def _heights(driver: Chrome) -> dict[str, str]:
    return driver.execute_script(  # type: ignore[no-any-return]
        "return Object.fromEntries([...document.querySelectorAll('#map svg rect.buffer')]"
        ".map((r) => [r.dataset.id, r.getAttribute('height')]))"
    )


def _x_ticks(driver: Chrome) -> list[int]:
    return [int(t) for t in _texts(driver, "#map svg g.xticks text")]


@browser
def test_zoom_is_along_program_points_and_keeps_the_axes(
    server: str, driver: Chrome, tmp_path: Path
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    data = random_data(500, overlap=0.05, seed=1, sync="insert")
    plan = plan_on_page(driver, server, data)
    expected = Expected(data, plan)
    base = _svg_data(driver)
    assert (base["x0"], base["x1"]) == (0, expected.horizon)
    axis, labels = _y_axis(driver), _texts(driver, "#map svg text.label")
    assert overlaps(driver.execute_script(JS_TEXT_BOXES)) == []
    # At full view the many required barriers are marks in their lane, no lines across.
    marks = driver.find_elements(By.CSS_SELECTOR, "#map svg g.lane line.barrier")
    barriers = set(plan.barriers.existing) | set(plan.barriers.inserted)
    assert len(barriers) > 40
    assert len(marks) == len(barriers | set(plan.barriers.required))
    assert driver.find_elements(By.CSS_SELECTOR, "#map svg line.barrier-line") == []

    driver.find_element(By.ID, "zoom-in").click()
    zoomed = _svg_data(driver)
    assert zoomed["x1"] - zoomed["x0"] == pytest.approx(expected.horizon / 2, abs=0.02)
    assert driver.find_element(By.ID, "zoom-level").text == "200 %"
    assert _y_axis(driver) == axis  # the address axis neither moves nor goes
    assert zoomed["ymax"] == base["ymax"]
    ticks = _x_ticks(driver)
    assert len(ticks) >= 4
    assert all(zoomed["x0"] - 0.01 <= t <= zoomed["x1"] + 0.01 for t in ticks)
    heights = _heights(driver)
    svg = driver.find_element(By.CSS_SELECTOR, "#map svg")
    # The wheel zooms in further about the pointer.
    driver.execute_script(
        """const r = arguments[0].getBoundingClientRect();
        arguments[0].dispatchEvent(new WheelEvent('wheel', {deltaY: -1000, bubbles: true,
          cancelable: true, clientX: r.left + r.width / 2, clientY: r.top + r.height / 2}));""",
        svg,
    )
    wheeled = wait_for(lambda: _changed(driver, zoomed))  # drawn at the next frame
    span = wheeled["x1"] - wheeled["x0"]
    assert span < (zoomed["x1"] - zoomed["x0"]) / 4
    assert _y_axis(driver) == axis
    assert len(_x_ticks(driver)) >= 4
    shown = _heights(driver)
    assert shown
    assert all(heights.get(i, h) == h for i, h in shown.items())  # zoomed along x only
    # Buffers too narrow to carry their names at full view now do; none named there loses it.
    named = _texts(driver, "#map svg text.label")
    assert set(named) - set(labels)
    inside = {
        i for i, (s, e, _, _) in expected.spans.items() if wheeled["x0"] <= s and e <= wheeled["x1"]
    }
    assert set(labels) & inside <= set(named)
    in_view = [p for p in barriers if wheeled["x0"] <= p <= wheeled["x1"]]
    lines = driver.find_elements(By.CSS_SELECTOR, "#map svg line.barrier-line")
    assert 0 < len(lines) == len(in_view) <= 40  # few in view: lines across the plot
    assert overlaps(driver.execute_script(JS_TEXT_BOXES)) == []
    screenshot(driver, "zoomed-random-500", tmp_path)
    # Dragging to the right shows earlier points.
    svg = driver.find_element(By.CSS_SELECTOR, "#map svg")
    ActionChains(driver).move_to_element(svg).click_and_hold().move_by_offset(
        120, 0
    ).release().perform()
    panned = wait_for(lambda: _changed(driver, wheeled))
    assert panned["x0"] < wheeled["x0"]
    assert panned["x1"] - panned["x0"] == pytest.approx(span, abs=0.02)
    assert _y_axis(driver) == axis

    driver.find_element(By.ID, "zoom-reset").click()
    assert _svg_data(driver) == base
    assert driver.find_element(By.ID, "zoom-level").text == "100 %"
    assert _texts(driver, "#map svg text.label") == labels

    # A row's click centres its buffer, zoomed until it carries its name.
    narrowest = min(
        (p for p in plan.placements if p.size * 420 >= 15 * base["ymax"]),
        key=lambda p: expected.spans[p.id][1] - expected.spans[p.id][0],
    )
    assert narrowest.id not in _texts(driver, "#map svg text.label")
    row = next(
        r
        for r in driver.find_elements(By.CSS_SELECTOR, "#placements tbody tr")
        if attribute(r, "data-id") == narrowest.id
    )
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", row)
    row.click()
    view = _svg_data(driver)
    start, end = expected.spans[narrowest.id][:2]
    assert view["x0"] < (start + end) / 2 < view["x1"]
    assert view["x1"] - view["x0"] < expected.horizon
    assert narrowest.id in _texts(driver, "#map svg text.label")
    lit = driver.execute_script(
        "return [...document.querySelectorAll('#map svg rect.buffer.hl')].map((r) => r.dataset.id)"
    )
    assert lit == [narrowest.id]
    assert overlaps(driver.execute_script(JS_TEXT_BOXES)) == []


# --- barriers, aliases, infeasible plans, the legend -----------------------------------------


@browser
@pytest.mark.parametrize(
    "data",
    [
        {**TEN, "barriers": [2, 3, 6, 9]},  # some existing ones the plan does not need
        {**TEN, "capacity": None, "target": None, "barriers": [], "options": {"sync": "none"}},
    ],
    ids=["insert", "none"],
)
def test_barriers_are_told_apart_by_kind(server: str, driver: Chrome, data: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    plan = plan_on_page(driver, server, data)
    b = plan.barriers
    want = {}
    for p in set(b.existing) | set(b.inserted) | set(b.required):
        if p in b.inserted:
            want[p] = "inserted"
        elif p in b.existing:
            want[p] = "required" if p in b.required else "unused"
        else:
            want[p] = "caller"
    marks = driver.find_elements(By.CSS_SELECTOR, "#map svg g.lane line.barrier")
    got = {int(attribute(m, "data-point")): attribute(m, "class").split()[1] for m in marks}
    assert got == want
    assert len(set(want.values())) >= 2 or data["options"]["sync"] == "none"
    if data["options"]["sync"] == "none":
        assert set(want.values()) == {"caller"}
    # Lines across the plot only for the barriers the plan relies on.
    lines = driver.find_elements(By.CSS_SELECTOR, "#map svg line.barrier-line")
    assert {int(attribute(m, "data-point")) for m in lines} == {
        p for p, kind in want.items() if kind != "unused"
    }


def _plan_example(driver: Chrome, server: str, name: str) -> tuple[dict[str, Any], planner.Plan]:
    """Load a shipped example with the page's example list; it plans on its own."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    open_page(driver, server)
    Select(driver.find_element(By.ID, "examples")).select_by_value(name)
    wait_for(lambda: state(driver) in ("planned", "error"))
    assert state(driver) == "planned", driver.find_element(By.ID, "errors").text
    data = _example(name)
    plan = planner.plan(data)
    assert planner.validate(data, plan).valid
    return data, plan


@browser
@pytest.mark.parametrize("name", ["nvfuser_inner_alias", "loop_nvfuser_inner_alias"])
def test_alias_pairs_are_linked(server: str, driver: Chrome, tmp_path: Path, name: str) -> None:
    from selenium.webdriver.common.by import By

    _, plan = _plan_example(driver, server, name)
    assert ["T2_s", "T3_s"] in plan.aliases  # the loop's adds the back edge, T3_s to T2_s
    links = driver.find_elements(By.CSS_SELECTOR, "#map svg path.alias")
    pairs = [[attribute(link, "data-from"), attribute(link, "data-to")] for link in links]
    assert pairs == plan.aliases
    for link, (earlier, later) in zip(links, plan.aliases, strict=True):
        title = link.find_element(By.TAG_NAME, "title").get_attribute("textContent")
        assert title is not None
        assert title.startswith(f"{later} reuses {earlier}'s bytes with no barrier")
    screenshot(driver, f"alias-{name}", tmp_path)


@browser
def test_several_live_ranges_are_drawn_apart(server: str, driver: Chrome) -> None:
    from selenium.webdriver.common.by import By

    data, plan = _plan_example(driver, server, "ranges_gap_fill")
    ranges = {b["id"]: b.get("ranges", [[b.get("start"), b.get("end")]]) for b in data["buffers"]}
    assert len(ranges["acc_s"]) == 2
    drawn: dict[str, list[list[int]]] = {}
    for rect in driver.find_elements(By.CSS_SELECTOR, "#map svg rect.buffer"):
        span = [int(attribute(rect, "data-start")), int(attribute(rect, "data-end"))]
        drawn.setdefault(attribute(rect, "data-id"), []).append(span)
    assert drawn == ranges
    rows = {r[0]: r[4] for r in driver.execute_script(JS_TABLE)}
    assert rows == {i: ", ".join(f"[{s}, {e})" for s, e in spans) for i, spans in ranges.items()}
    assert plan.arena_bytes == 16384  # tmp_s fills the gap between acc_s's ranges
    # Between its ranges acc_s holds nothing.
    _point_to(driver, 4)
    assert _list_ids(driver, "point-list") == ["tmp_s"]


@browser
def test_an_infeasible_plan_shades_the_part_over_capacity(
    server: str, driver: Chrome, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    data = _example("too_big_for_sm75")
    plan = plan_on_page(driver, server, data)
    assert plan.status == "infeasible"
    cert = plan.certificate
    assert cert is not None
    assert plan.capacity is not None
    # The axis shows the bytes over capacity, shaded from the capacity line up.
    ymax = _svg_data(driver)["ymax"]
    assert cert.live_bytes <= ymax
    shade = driver.find_element(By.CSS_SELECTOR, "#map svg rect.over-capacity")
    line = driver.find_element(By.CSS_SELECTOR, "#map svg line.capacity")
    bottom = float(attribute(shade, "y")) + float(attribute(shade, "height"))
    assert bottom == pytest.approx(float(attribute(line, "y1")), abs=0.02)
    assert attribute(line, "data-bytes") == str(plan.capacity)
    # The certificate's point and buffers.
    point = driver.find_element(By.CSS_SELECTOR, "#map svg rect.certificate-point")
    assert attribute(point, "data-point") == str(cert.point)
    marked = driver.find_elements(By.CSS_SELECTOR, "#map svg rect.buffer.certificate")
    assert sorted(attribute(r, "data-id") for r in marked) == sorted(cert.buffers)
    assert set(cert.buffers) <= set(_list_ids(driver, "peak-list"))
    # A plan that cannot launch claims no opt-in and no occupancy.
    assert plan.launch.requires_opt_in  # what the plan's launch figures say regardless
    opt_in = next(t for t in _texts(driver, "#stats tr") if t.startswith("opt-in needed"))
    assert opt_in == "opt-in needed no launch: the plan does not fit"
    blocks = next(t for t in _texts(driver, "#stats tr") if t.startswith("blocks per SM"))
    assert blocks == "blocks per SM none: the plan does not fit"
    screenshot(driver, "infeasible", tmp_path)


@browser
@pytest.mark.parametrize(
    ("case", "data"),
    [
        ("insert", TEN),
        ("existing", {**TEN, "options": {"sync": "existing"}}),
        ("none", {**TEN, "capacity": None, "target": None, "barriers": [], "options": {}}),
        ("infeasible", _example("too_big_for_sm75")),
        ("alias", _example("nvfuser_inner_alias")),
        ("loop", _example("loop_pipelined_gemm")),
    ],
)
def test_legend_names_what_is_drawn(
    server: str, driver: Chrome, case: str, data: dict[str, Any]
) -> None:
    if case == "none":
        data = {k: v for k, v in data.items() if v is not None}
        data["options"] = {"sync": "none"}
    plan_on_page(driver, server, data)
    drawn, legend = driver.execute_script(JS_DRAWN_KINDS)
    assert sorted(legend) == sorted(drawn)
    assert len(legend) == len(set(legend))
    assert {"buffer", "live", "lower-bound"} <= set(drawn)
