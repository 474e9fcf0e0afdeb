"""The SVG memory map, parsed back: one rectangle per placement where time and address put
it, barriers, capacity, lower bound and the live-bytes curve; readable at 500 buffers."""

from __future__ import annotations

import json
import random
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import ImageFont

import planner
from planner.cli import main
from planner.core.io import parse_request
from planner.emit import emit_svg
from planner.generate import random_request
from tests.support.paths import TESTS
from tests.support.samples import LEGEND_CASES, TEN

NS = {"s": "http://www.w3.org/2000/svg"}
GOLDEN = TESTS / "golden"


def _svg(data: dict[str, Any]) -> tuple[planner.Plan, ET.Element]:
    """The plan of ``data``, checked by the static validator, and its map parsed."""
    request = parse_request(data)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    return plan, ET.fromstring(emit_svg(request, plan))


def _f(node: ET.Element, name: str) -> float:
    return float(node.attrib[name])


def _plots(root: ET.Element) -> list[ET.Element]:
    return [r for r in root.iter(f"{{{NS['s']}}}rect") if r.get("class") == "plot"]


def _rects(root: ET.Element) -> list[ET.Element]:
    return [r for r in root.iter(f"{{{NS['s']}}}rect") if r.get("class") == "buffer"]


def _expected_box(plot: ET.Element, start: int, end: int, lo: int, hi: int) -> tuple[float, ...]:
    """Where [start, end) x [lo, hi) bytes belongs: points across, addresses upwards."""
    x, y, w, h = (_f(plot, k) for k in ("x", "y", "width", "height"))
    horizon, ymax = _f(plot, "data-horizon"), _f(plot, "data-ymax")
    left, right = x + w * start / horizon, x + w * end / horizon
    top, bottom = y + h * (1 - hi / ymax), y + h * (1 - lo / ymax)
    return left, top, right - left, bottom - top


def test_rectangles_match_placements() -> None:
    plan, root = _svg(TEN)
    plot = _plots(root)[0]
    rects = _rects(root)
    assert len(rects) == len(plan.placements) == 10
    by_id = {r.attrib["data-id"]: r for r in rects}
    spans = {b["id"]: b for b in TEN["buffers"]}
    for p in plan.placements:
        r = by_id[p.id]
        b = spans[p.id]
        want = _expected_box(plot, b["start"], b["end"], p.offset, p.offset + p.size)
        got = tuple(_f(r, k) for k in ("x", "y", "width", "height"))
        assert got == pytest.approx(want, abs=0.01), p.id
        title = r.find("s:title", NS)
        assert title is not None
        assert title.text is not None
        assert title.text.startswith(f"{p.id}: offset {p.offset}, {p.size} bytes")
    assert _f(plot, "data-ymax") >= plan.arena_bytes


def test_labels_barriers_capacity_and_curve() -> None:
    plan, root = _svg(TEN)
    plot = _plots(root)[0]
    texts = {t.text for t in root.iter(f"{{{NS['s']}}}text") if t.get("class") == "label"}
    assert {"A_s", "acc", "C_s", "x<&>"} <= texts  # big enough to hold their names
    assert "red" not in texts  # 512 bytes: a sliver, tooltip only
    lines = list(root.iter(f"{{{NS['s']}}}line"))
    barriers = {
        (int(ln.attrib["data-point"]), ln.attrib["class"])
        for ln in lines
        if ln.get("class", "").startswith("barrier") and "data-point" in ln.attrib
    }
    want = {(p, "barrier existing") for p in plan.barriers.existing}
    want |= {(p, "barrier inserted") for p in plan.barriers.inserted}
    assert plan.barriers.inserted  # this request gets new barriers
    assert barriers == want
    for ln in lines:
        if "data-point" in ln.attrib:
            x = _expected_box(plot, int(ln.attrib["data-point"]), 0, 0, 0)[0]
            assert _f(ln, "x1") == pytest.approx(x, abs=0.01)
    capacity = next(ln for ln in lines if ln.get("class") == "capacity")
    bound = next(ln for ln in lines if ln.get("class") == "lower-bound")
    assert _f(capacity, "y1") == pytest.approx(_expected_box(plot, 0, 0, 0, 20000)[1], abs=0.01)
    assert _f(bound, "y1") == pytest.approx(
        _expected_box(plot, 0, 0, 0, plan.lower_bound)[1], abs=0.01
    )
    # The curve's highest step is the peak of live bytes, counted here by brute force.
    peak = max(
        sum(b["size"] for b in TEN["buffers"] if b["start"] <= t < b["end"]) for t in range(10)
    )
    path = next(p for p in root.iter(f"{{{NS['s']}}}path") if p.get("class") == "live")
    ys = [float(v) for v in re.findall(r"V(-?[\d.]+)", path.attrib["d"])]
    assert min(ys) == pytest.approx(_expected_box(plot, 0, 0, 0, peak)[1], abs=0.01)


def test_spilled_buffers_get_the_workspace_panel() -> None:
    data = json.loads((GOLDEN / "spill.json").read_text())
    plan, root = _svg(data)
    shared_plot, global_plot = _plots(root)
    assert _f(global_plot, "data-ymax") >= plan.global_bytes > 0
    spans = {b["id"]: b for b in data["buffers"]}
    for r in _rects(root):
        p = next(p for p in plan.placements if p.id == r.attrib["data-id"])
        assert r.attrib["data-memory"] == p.memory
        plot = global_plot if p.memory == "global" else shared_plot
        b = spans[p.id]
        want = _expected_box(plot, b["start"], b["end"], p.offset, p.offset + p.size)
        assert tuple(_f(r, k) for k in ("x", "y", "width", "height")) == pytest.approx(
            want, abs=0.01
        )


def test_readable_at_500_buffers() -> None:
    rng = random.Random(5)
    buffers = []
    for i in range(500):
        start = rng.randrange(0, 400)
        buffers.append(
            {
                "id": f"buf{i}",
                "size": rng.choice([64, 256, 1024, 4096, 16384]),
                "start": start,
                "end": start + rng.randrange(1, 40),
            }
        )
    data = {"name": "big", "alignment": 16, "buffers": buffers, "options": {"solver": "greedy"}}
    request = parse_request(data)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    text = emit_svg(request, plan)
    assert len(text) < 400_000  # bytes: a browser opens it at once
    root = ET.fromstring(text)
    rects = _rects(root)
    assert len(rects) == 500
    assert all(r.find("s:title", NS) is not None for r in rects)
    labels = [t for t in root.iter(f"{{{NS['s']}}}text") if t.get("class") == "label"]
    assert len(labels) < 500  # small rectangles keep only their tooltip
    boxes = {r.attrib["data-id"]: r for r in rects}
    for t in labels:
        assert t.text is not None
        box = boxes[t.text]
        assert _f(box, "width") >= 6.6 * len(t.text)
        assert _f(box, "height") >= 12


def test_cli_writes_svg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "ten.json"
    source.write_text(json.dumps(TEN))
    out = tmp_path / "map.svg"
    assert main(["plan", str(source), "--svg", str(out)]) == 0
    plan = planner.Plan.model_validate_json(capsys.readouterr().out)
    assert planner.validate(TEN, plan).valid
    assert len(_rects(ET.fromstring(out.read_text()))) == len(plan.placements)
    assert main(["plan", str(source), "--svg", str(tmp_path / "no" / "map.svg")]) == 2
    assert "cannot write" in capsys.readouterr().err


# --- labels and legend ----------------------------------------------------------------------

SVG = f"{{{NS['s']}}}"


def _notes(root: ET.Element) -> list[ET.Element]:
    return [t for t in root.iter(f"{SVG}text") if t.get("class") == "note"]


def _with_capacity(capacity: int) -> dict[str, Any]:
    return {**TEN, "capacity": capacity}


def _lower_bound() -> int:
    plan, _ = _svg(TEN)
    assert plan.lower_bound < 20000
    return plan.lower_bound


def test_capacity_and_lower_bound_share_one_label_when_equal() -> None:
    bound = _lower_bound()
    plan, root = _svg(_with_capacity(bound))
    assert plan.capacity == plan.lower_bound == bound
    notes = _notes(root)
    assert len(notes) == 1
    text = "".join(notes[0].itertext())
    assert "capacity" in text
    assert "lower bound" in text
    assert f"{bound} B" in text


@pytest.mark.parametrize("extra", [16, 64, 512])
def test_capacity_and_lower_bound_labels_stack_when_close(extra: int) -> None:
    bound = _lower_bound()
    plan, root = _svg(_with_capacity(bound + extra))
    assert plan.capacity == bound + extra
    plot = _plots(root)[0]
    right = _f(plot, "x") + _f(plot, "width")
    notes = _notes(root)
    assert len(notes) == 2
    capacity, lower = sorted(notes, key=lambda t: "lower" in "".join(t.itertext()))
    assert "capacity" in "".join(capacity.itertext())
    for note in notes:
        assert _f(note, "x") > right  # in the margin: no barrier or buffer under it
    # Two lines of text each: the tops must be at least two line heights apart, capacity
    # (the larger value) above.
    lines = 2 * 1.2 * _f(capacity, "font-size")
    assert _f(lower, "y") - _f(capacity, "y") >= lines
    assert capacity.attrib["data-bytes"] == str(bound + extra)
    assert lower.attrib["data-bytes"] == str(bound)


def test_capacity_above_the_scale_is_a_note_not_a_line() -> None:
    _, root = _svg(_with_capacity(10_000_000))
    assert not [ln for ln in root.iter(f"{SVG}line") if ln.get("class") == "capacity"]
    text = " ".join("".join(t.itertext()) for t in _notes(root))
    assert "capacity, off the scale" in text
    assert "10000000 B" in text
    assert "capacity" not in _legend_kinds(root)


def _legend_kinds(root: ET.Element) -> set[str]:
    return {g.attrib["data-kind"] for g in root.iter(f"{SVG}g") if g.get("class") == "legend-item"}


def _drawn_kinds(root: ET.Element) -> set[str]:
    """The kinds of mark in the plots, read from the marks themselves."""
    legend = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "legend")
    in_legend = set(legend.iter())
    kinds: set[str] = set()
    for node in root.iter():
        if node in in_legend:
            continue
        cls = node.get("class", "").split()
        if node.tag == f"{SVG}line" and cls[:1] == ["barrier"]:
            kinds.add(f"barrier-{cls[1]}")
        elif node.tag == f"{SVG}line" and cls[:1] in (["capacity"], ["lower-bound"]):
            kinds.add(cls[0])
        elif node.tag == f"{SVG}path" and cls == ["live"]:
            kinds.add("live")
    return kinds


@pytest.mark.parametrize("case", sorted(LEGEND_CASES))
def test_legend_names_only_what_is_drawn(case: str) -> None:
    data, want = LEGEND_CASES[case]
    _, root = _svg(data)
    drawn = _drawn_kinds(root)
    assert drawn == want
    assert _legend_kinds(root) == drawn


def test_spilled_plan_legend() -> None:
    _, root = _svg(json.loads((GOLDEN / "spill.json").read_text()))
    assert _legend_kinds(root) == _drawn_kinds(root)


def test_labels_come_after_every_line() -> None:
    """Labels drawn last: no barrier, curve or bound line strikes through one."""
    _, root = _svg(TEN)
    order = list(root.iter())
    first_label = min(order.index(t) for t in root.iter(f"{SVG}text") if t.get("class") == "label")
    marks = [
        n
        for n in order
        if n.tag in (f"{SVG}line", f"{SVG}path")
        and n.get("class", "").split()[:1] in (["barrier"], ["capacity"], ["lower-bound"], ["live"])
        and n not in set(next(g for g in root.iter(f"{SVG}g") if g.get("class") == "legend").iter())
    ]
    assert marks
    assert all(order.index(m) < first_label for m in marks)


def _font_width() -> Callable[[str], float]:
    """The width in px of a text at 11 px in DejaVu Sans, the widest common default sans."""
    try:
        font = ImageFont.truetype("DejaVuSans.ttf", 11)
    except OSError:
        pytest.skip("DejaVu Sans is not installed")
    return font.getlength


@pytest.mark.parametrize(
    "ident", ["mmmmmmmm", "WWWW_wide", "iiiiiiiiiiiiiiii", "A_s<&>", "buf123", "acc_frag_f32"]
)
def test_a_drawn_label_fits_its_rectangle(ident: str) -> None:
    """Sized so the label just about fits or not: where drawn, the real glyphs fit."""
    width = _font_width()
    drawn = left_out = 0
    for size in (1024, 2048, 4096):
        for end in range(1, 12):
            data = {
                "name": "fit",
                "alignment": 16,
                "buffers": [
                    {"id": ident, "size": size, "start": 0, "end": end},
                    {"id": "rest", "size": 4096, "start": end, "end": 60},
                ],
            }
            _, root = _svg(data)
            box = next(r for r in _rects(root) if r.attrib["data-id"] == ident)
            labels = [t for t in root.iter(f"{SVG}text") if t.get("data-for") == ident]
            if labels:
                drawn += 1
                assert width(ident) <= _f(box, "width"), (ident, size, end)
                assert _f(box, "height") >= 13  # the text box of an 11 px font
            else:
                left_out += 1
    assert drawn  # the sizes straddle the limit
    assert left_out


def test_500_buffer_labels_fit_in_the_real_font() -> None:
    width = _font_width()
    request = random_request(500, overlap=0.2, seed=3)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    root = ET.fromstring(emit_svg(request, plan))
    boxes = {r.attrib["data-id"]: r for r in _rects(root)}
    labels = [t for t in root.iter(f"{SVG}text") if t.get("class") == "label"]
    assert 20 < len(labels) < 500
    for t in labels:
        assert t.text == t.attrib["data-for"]
        assert width(t.text) <= _f(boxes[t.text], "width")


# Characters outside XML 1.0's Char production that a request may hold (the C0 controls other
# than tab, line feed and carriage return; U+FFFE, U+FFFF; a lone surrogate is refused), and
# ones it allows.
NOT_XML = [*(chr(c) for c in range(0x20) if c not in (0x09, 0x0A, 0x0D)), "\ufffe", "\uffff"]
XML_EDGES = ["\t", "\n", "\r", "\x7f", "\x85", "\ufffd", "\U0001f600", "\\x01"]


def _escaped(c: str) -> str:
    """How the map writes a character XML cannot carry."""
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def test_ids_xml_cannot_carry_give_a_well_formed_map() -> None:
    ids = [*NOT_XML, *(f"a{c}b" for c in NOT_XML), *XML_EDGES]
    data = {
        "name": "k\x00\x1b[31m\uffff",
        "options": {"sync": "none"},
        "buffers": [
            {"id": ident, "size": 16, "start": k % 9, "end": k % 9 + 2}
            for k, ident in enumerate(ids)
        ],
    }
    request = parse_request(data)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    text = emit_svg(request, plan)
    text.encode("utf-8")  # no lone surrogate: the document can be written out
    root = ET.fromstring(text)  # well-formed
    got = [r.attrib["data-id"] for r in _rects(root)]
    want = [
        *(_escaped(c) for c in NOT_XML),
        *(f"a{_escaped(c)}b" for c in NOT_XML),
        *XML_EDGES,  # characters XML carries come back as they were
    ]
    assert got == want
    tips = [r.findtext(f"{SVG}title") or "" for r in _rects(root)]
    # XML reads a carriage return in text as a line feed.
    assert [t.split(": offset ")[0] for t in tips] == [w.replace("\r", "\n") for w in want]
    title = next(t for t in root.iter(f"{SVG}text") if t.get("font-weight") == "bold")
    assert title.text is not None
    assert title.text.startswith("k\\x00\\x1b[31m\\uffff: ")


def test_a_lone_surrogate_is_refused_before_any_map() -> None:
    with pytest.raises(planner.RequestError):
        parse_request({"buffers": [{"id": "\ud800", "size": 1, "start": 0, "end": 1}]})


def test_a_label_xml_cannot_carry_is_drawn_escaped() -> None:
    data = {
        "name": "label",
        "buffers": [{"id": "\x01\x02x", "size": 4096, "start": 0, "end": 40}],
    }
    _, root = _svg(data)
    labels = [t for t in root.iter(f"{SVG}text") if t.get("class") == "label"]
    assert [(t.text, t.get("data-for")) for t in labels] == [("\\x01\\x02x", "\\x01\\x02x")]


def _stage_buffers(capacity: int) -> dict[str, Any]:
    """Eight 8 KiB stage buffers live together (64 KiB) under a much larger capacity."""
    return {
        "name": "stages",
        "capacity": capacity,
        "buffers": [{"id": f"s{k}", "size": 8192, "start": 0, "end": 4} for k in range(8)],
    }


def test_the_scale_runs_to_the_arena_when_the_capacity_is_far_above() -> None:
    plan, root = _svg(_stage_buffers(200 * 1024))
    assert plan.arena_bytes == 65536
    (plot,) = _plots(root)
    assert plan.arena_bytes <= _f(plot, "data-ymax") <= 1.25 * plan.arena_bytes
    assert not [ln for ln in root.iter(f"{SVG}line") if ln.get("class") == "capacity"]
    assert "capacity, off the scale" in "".join(root.itertext())
    # each 8 KiB stage is an eighth of the plot, not a sliver
    heights = {round(_f(r, "height"), 3) for r in _rects(root)}
    assert len(heights) == 1
    assert heights.pop() >= _f(plot, "height") / 10  # 8 KiB of at most 80 KiB


def test_a_close_capacity_stays_on_the_scale_as_a_line() -> None:
    _, root = _svg(_stage_buffers(72 * 1024))
    (plot,) = _plots(root)
    assert _f(plot, "data-ymax") >= 72 * 1024
    assert [ln for ln in root.iter(f"{SVG}line") if ln.get("class") == "capacity"]


def test_address_ticks_are_whole_kib() -> None:
    _, root = _svg(_stage_buffers(200 * 1024))
    ticks = [
        "".join(t.itertext())
        for t in root.iter(f"{SVG}text")
        if t.get("class") == "tick" and t.get("text-anchor") == "end"
    ]
    assert ticks[0] == "0"
    assert len(ticks) >= 4
    assert all(re.fullmatch(r"\d+ KiB", tick) for tick in ticks[1:]), ticks
    values = [int(tick.split()[0]) for tick in ticks[1:]]
    steps = {b - a for a, b in zip([0, *values], values, strict=False)}
    assert len(steps) == 1
    assert steps.pop() in (4, 8, 16, 32)
