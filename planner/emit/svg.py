"""The plan as an SVG memory map: program points to the right, addresses upwards.

One rectangle per buffer (``class="buffer"``, with ``data-id``, ``data-offset``, ``data-size``
and a ``<title>`` tooltip), labelled when the label fits inside it; barriers as vertical lines
(existing solid, inserted dashed, the caller's own under sync "none" dotted); the capacity
line; the live bytes at each point as a step curve with the lower bound. Spilled buffers get
a second panel for the global workspace.

No two labels overprint: buffer labels sit inside their own rectangles (which never overlap in
a valid plan) on a halo, above every line; the capacity and lower-bound labels stand in the
right margin, stacked apart when their values are close and merged when equal; the legend
names only what is drawn.

Ids and the request's name are free text; the document is XML 1.0, which cannot carry every
character (the C0 controls other than tab, line feed and carriage return, surrogates, U+FFFE
and U+FFFF, even as character references). Those are written as escapes (``\\x01``,
``\\ud800``) wherever such text appears (``_legible``), so the map stays well-formed and the
id readable.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from xml.sax.saxutils import escape, quoteattr

from planner.core.models import Plan, PlanRequest
from planner.emit._common import Placed, placed

__all__ = ["emit_svg"]

WIDTH = 960  # px
LEFT, RIGHT, TOP = 90, 150, 48  # px margins around the plots; line labels go right
SHARED_HEIGHT, GLOBAL_HEIGHT = 400, 160  # px, plot areas
GAP = 64  # px between panels, and below the last one for the axis and the legend
FONT = 11  # px, labels and ticks
NOTE_FONT = 10  # px, the line labels in the right margin
KIB = 1024
CAPACITY_JOINS = 1.25  # the capacity is on the scale when at most this times the arena
LABEL_HEIGHT = 15  # px, the least rectangle height that holds a label (text box about 13)
NOTE_STEP = 2.6 * NOTE_FONT  # px, from one two-line margin label's top to the next one's
# Advance widths in em, rounded up from DejaVu Sans (the widest common default sans-serif),
# so a label judged to fit does fit in the browser's font.
_NARROW, _WIDE, _SYMBOL = set("ijlftrI.,:;'|!()[]{} -/"), set("mwMW@%"), set("<>=+~&#*^")
DENSE_BARRIERS = 60  # more barriers than this are drawn faint
_LOOP_FILL = "#f5cba7"  # loop bodies
_ARM_FILLS = ("#aed6f1", "#d2b4de")  # branch arms, alternating
# Characters outside XML 1.0's Char production.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_BARRIER_TIPS = {
    "existing": "existing barrier at point",
    "inserted": "barrier inserted by the plan at point",
    "caller": "the caller synchronizes at point",
}


@dataclass(frozen=True)
class _Panel:
    """One plot area: points ``[0, horizon)`` across, bytes ``[0, ymax)`` up."""

    x: float
    y: float
    width: float
    height: float
    horizon: int
    ymax: int

    def px(self, point: float) -> float:
        return self.x + point * self.width / self.horizon

    def py(self, address: float) -> float:
        return self.y + self.height - address * self.height / self.ymax


def emit_svg(request: PlanRequest, plan: Plan) -> str:
    """The memory map of ``plan`` as a standalone SVG document."""
    buffers = [replace(b, id=_legible(b.id)) for b in placed(request, plan, set())]
    shared = [b for b in buffers if b.memory == "shared"]
    spilled = [b for b in buffers if b.memory == "global"]
    horizon = max(request.horizon, 1)
    live = _live_curve(shared)
    peak = max((v for _, v in live), default=0)
    top = max(plan.arena_bytes, plan.lower_bound, peak, 1)
    capacity = plan.capacity
    # The scale runs to the arena; the capacity joins it only when it is close above (else
    # a margin note says where it is), so the plan fills the plot.
    if capacity is not None and capacity <= CAPACITY_JOINS * top:
        top = max(top, capacity)
    plot_width = WIDTH - LEFT - RIGHT
    panel = _Panel(LEFT, TOP, plot_width, SHARED_HEIGHT, horizon, _nice_top(top))
    height = TOP + SHARED_HEIGHT + GAP + 28
    second = None
    if spilled:
        y = TOP + SHARED_HEIGHT + GAP + 20
        second = _Panel(LEFT, y, plot_width, GLOBAL_HEIGHT, horizon, _nice_top(plan.global_bytes))
        height = int(y + GLOBAL_HEIGHT + GAP + 28)
    out = _head(plan, height, horizon, len(spilled))
    out += _axes(panel, "shared memory (bytes)")
    drawn_control = _control(panel, request, out) if request.has_control_flow else []
    rects, labels = _rects(panel, shared, offset=0)
    out += rects
    drawn = set(_barriers(panel, plan, out)) | set(drawn_control)
    out.append(_curve(panel, live))
    notes = [(plan.lower_bound, "lower-bound", "lower bound")]
    if capacity is not None and capacity <= panel.ymax:
        notes.append((capacity, "capacity", "capacity"))
        drawn.add("capacity")
    for value, cls, _ in notes:
        out.append(_hline(panel, value, cls))
    drawn |= {"lower-bound", "live"}
    if second is not None:
        out += _axes(second, "global workspace (bytes)")
        spilled_rects, spilled_labels = _rects(second, spilled, offset=len(shared))
        out += spilled_rects
        labels += spilled_labels
        drawn |= set(_barriers(second, plan, out))
    # Labels last, so no line strikes through them.
    out += ['<g class="labels">', *labels, "</g>"]
    out += _margin_notes(panel, notes, capacity if "capacity" not in drawn else None)
    bottom = (second or panel).y + (second or panel).height
    out.append(
        f'<text x="{_n(LEFT + plot_width / 2)}" y="{_n(bottom + 34)}" text-anchor="middle" '
        'class="tick">program point</text>'
    )
    out += _legend(height - 10, drawn)
    out.append("</svg>")
    return "\n".join(out) + "\n"


_STYLE = (
    "<style>"
    ".buffer{stroke:#333;stroke-width:0.5}.label{fill:#111;pointer-events:none;"
    "paint-order:stroke;stroke:#fff;stroke-opacity:0.75;stroke-width:2.5px;"
    "stroke-linejoin:round}.note{fill:#222}"
    ".axis{stroke:#444}.grid{stroke:#e3e3e3}.tick{fill:#444}"
    ".barrier{stroke:#555;stroke-width:1}.barrier.inserted{stroke:#c0392b;"
    "stroke-dasharray:4 3}.barrier.caller{stroke:#7d3c98;stroke-dasharray:1 2}"
    ".capacity{stroke:#c0392b;stroke-width:1.5}"
    ".lower-bound{stroke:#1f618d;stroke-dasharray:6 4}.live{fill:none;stroke:#1f618d;"
    "stroke-width:1.2;stroke-opacity:0.8}"
    # Lines keep their width on screen when a viewer zooms in.
    "line,path,rect{vector-effect:non-scaling-stroke}</style>"
)


def _head(plan: Plan, height: int, horizon: int, spilled: int) -> list[str]:
    """The document's opening: the root element, the style, the background and the titles."""
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11" '
        f'data-horizon="{horizon}">',
        _STYLE,
        f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{escape(_title(plan))}</text>',
        f'<text x="{LEFT}" y="38" class="tick">{escape(_subtitle(plan, spilled))}</text>',
    ]


def _title(plan: Plan) -> str:
    return f"{_legible(plan.name)}: {plan.status}, arena {plan.arena_bytes} B"


def _legible(text: str) -> str:
    """``text`` with each character XML 1.0 cannot carry written as an escape: ``\\x01``, or
    ``\\ud800`` and ``\\uffff`` past U+00FF."""
    return _NOT_XML.sub(lambda m: ascii(m[0])[1:-1], text)


def _subtitle(plan: Plan, spilled: int) -> str:
    parts = [f"lower bound {plan.lower_bound} B", f"naive {plan.naive_bytes} B"]
    if plan.capacity is not None:
        parts.append(f"capacity {plan.capacity} B")
    if plan.launch.blocks_per_sm is not None:
        parts.append(
            f"{plan.launch.blocks_per_sm} blocks/SM (naive {plan.launch.naive_blocks_per_sm})"
        )
    if spilled:
        parts.append(f"{spilled} spilled to a {plan.global_bytes} B global workspace")
    return ", ".join(parts)


def _live_curve(buffers: list[Placed]) -> list[tuple[int, int]]:
    """``(point, live bytes from it on)`` at every point where the live bytes change."""
    delta: dict[int, int] = {}
    for b in buffers:
        for start, end in b.ranges or ((b.start, b.end),):
            delta[start] = delta.get(start, 0) + b.size
            delta[end] = delta.get(end, 0) - b.size
    steps: list[tuple[int, int]] = []
    total = 0
    for point in sorted(delta):
        total += delta[point]
        steps.append((point, total))
    return steps


def _nice_top(value: int) -> int:
    """``value`` plus a little headroom, rounded up to a tick step."""
    step = _byte_step(max(value, 1) * 1.05)
    return max(step, math.ceil(max(value, 1) * 1.05 / step) * step)


def _byte_step(span: float, ticks: int = 6) -> int:
    """A tick step for bytes: from 4 KiB on a power of two KiB (or MiB, GiB), else decimal."""
    raw = max(span / ticks, 1.0)
    if span < 4 * KIB:
        return _step(span, ticks)
    step = KIB
    while step < raw:
        step *= 2
    return step


def _bytes_tick(value: int, step: int) -> str:
    """A tick label: whole KiB, MiB or GiB where the step is one, else bytes."""
    for unit, name in ((KIB**3, "GiB"), (KIB**2, "MiB"), (KIB, "KiB")):
        if step >= unit and step % unit == 0:
            return f"{value // unit} {name}" if value else "0"
    return str(value)


def _step(span: float, ticks: int = 6) -> int:
    """A 1, 2 or 5 times a power of ten step that cuts ``span`` in about ``ticks`` parts."""
    raw = max(span / ticks, 1.0)
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * power >= raw:
            return int(m * power)
    return int(10 * power)


def _axes(panel: _Panel, label: str) -> list[str]:
    out = [
        f'<rect class="plot" x="{_n(panel.x)}" y="{_n(panel.y)}" width="{_n(panel.width)}" '
        f'height="{_n(panel.height)}" fill="#fafafa" stroke="#444" data-ymax="{panel.ymax}" '
        f'data-horizon="{panel.horizon}"/>'
    ]
    step = _byte_step(panel.ymax)
    for value in range(0, panel.ymax + 1, step):
        y = _n(panel.py(value))
        out.append(
            f'<line class="grid" x1="{_n(panel.x)}" y1="{y}" x2="{_n(panel.x + panel.width)}" '
            f'y2="{y}"/>'
        )
        out.append(
            f'<text class="tick" x="{_n(panel.x - 6)}" y="{y}" dy="0.36em" text-anchor="end">'
            f"{_bytes_tick(value, step)}</text>"
        )
    xstep = _step(panel.horizon, ticks=10)
    for point in range(0, panel.horizon + 1, xstep):
        x = _n(panel.px(point))
        bottom = panel.y + panel.height
        out.append(
            f'<line class="axis" x1="{x}" y1="{_n(bottom)}" x2="{x}" y2="{_n(bottom + 4)}"/>'
        )
        out.append(
            f'<text class="tick" x="{x}" y="{_n(bottom + 16)}" text-anchor="middle">{point}</text>'
        )
    mid = panel.y + panel.height / 2
    out.append(
        f'<text class="tick" transform="translate({_n(panel.x - 74)} {_n(mid)}) rotate(-90)" '
        f'text-anchor="middle">{escape(label)}</text>'
    )
    return out


def _rects(panel: _Panel, buffers: list[Placed], offset: int) -> tuple[list[str], list[str]]:
    """The buffers' rectangles, and the labels of those whose id fits inside."""
    out = ['<g class="buffers">']
    labels: list[str] = []
    for k, b in enumerate(buffers):
        hue = ((offset + k) * 137.508) % 360
        live = ", ".join(f"[{s}, {e})" for s, e in b.ranges or ((b.start, b.end),))
        tip = f"{b.id}: offset {b.offset}, {b.size} bytes, live {live}, {b.memory} memory"
        y0, y1 = panel.py(b.offset + b.size), panel.py(b.offset)
        height = max(y1 - y0, 0.5)
        # One rectangle per live range; the label goes in the widest.
        spans = [(panel.px(s), panel.px(e), s, e) for s, e in b.ranges or ((b.start, b.end),)]
        x0, x1 = max(spans, key=lambda span: span[1] - span[0])[:2]
        width = max(x1 - x0, 0.5)
        for sx0, sx1, s, e in spans:
            out.append(
                f'<rect class="buffer" data-id={quoteattr(b.id)} data-offset="{b.offset}" '
                f'data-size="{b.size}" data-start="{s}" data-end="{e}" '
                f'data-memory="{b.memory}" x="{_n(sx0)}" y="{_n(y0)}" '
                f'width="{_n(max(sx1 - sx0, 0.5))}" height="{_n(height)}" '
                f'fill="hsl({hue:.1f},60%,72%)"><title>{escape(tip)}</title></rect>'
            )
        # Inside its own rectangle, and rectangles of a valid plan never overlap.
        if width >= _text_width(b.id) + 6 and height >= LABEL_HEIGHT:
            labels.append(
                f'<text class="label" data-for={quoteattr(b.id)} x="{_n(x0 + width / 2)}" '
                f'y="{_n(y0 + height / 2)}" dy="0.36em" text-anchor="middle">{escape(b.id)}</text>'
            )
    out.append("</g>")
    return out, labels


def _text_width(text: str, size: float = FONT) -> float:
    """An upper estimate of ``text``'s width in px at ``size`` px in a sans-serif font."""
    em = 0.0
    for c in text:
        if c in _NARROW:
            em += 0.42
        elif c in _WIDE:
            em += 1.0
        elif c in _SYMBOL:
            em += 0.84
        elif c.isupper():
            em += 0.8
        elif c.isascii():
            em += 0.66
        else:
            em += 1.0  # CJK and other scripts: a full em
    return em * size


def _barriers(panel: _Panel, plan: Plan, out: list[str]) -> list[str]:
    """Append the barrier lines to ``out``; return the kinds drawn."""
    inserted, existing = set(plan.barriers.inserted), set(plan.barriers.existing)
    # With sync "none" the caller synchronizes at the required points the request lacks.
    points = sorted(existing | inserted | set(plan.barriers.required))
    # Many barriers would hide the buffers: draw them faint.
    faint = ' stroke-opacity="0.35"' if len(points) > DENSE_BARRIERS else ""
    kinds: list[str] = []
    for point in points:
        kind = "inserted" if point in inserted else "existing" if point in existing else "caller"
        if f"barrier-{kind}" not in kinds:
            kinds.append(f"barrier-{kind}")
        x = _n(panel.px(point))
        out.append(
            f'<line class="barrier {kind}" data-point="{point}"{faint} x1="{x}" y1="{_n(panel.y)}" '
            f'x2="{x}" y2="{_n(panel.y + panel.height)}"><title>{_BARRIER_TIPS[kind]} '
            f"{point}</title></line>"
        )
    return kinds


def _control(panel: _Panel, request: PlanRequest, out: list[str]) -> list[str]:
    """Shaded bands for the loop bodies and branch arms, under the buffers, each labelled at
    the top of the plot (a nested one a line lower); returns the kinds drawn."""
    bands: list[tuple[int, int, str, str, str, str]] = []  # start, end, class, label, attrs, fill
    for i, loop in enumerate(request.loops):
        trips = loop.count_text
        attrs = f'data-loop="{i}" data-trips="{trips}"'
        bands.append((loop.start, loop.end, "loop", f"loop \u00d7{trips}", attrs, _LOOP_FILL))
    for j, branch in enumerate(request.branches):
        for k, (s, e) in enumerate(branch.arms):
            attrs = f'data-branch="{j}" data-arm="{k}"'
            label = f"branch {j}, arm {k}" if k == 0 else f"arm {k}"
            bands.append((s, e, "arm", label, attrs, _ARM_FILLS[k % 2]))
    kinds: list[str] = []
    out.append('<g class="control">')
    for s, e, cls, label, attrs, fill in sorted(bands, key=lambda b: (b[0], -b[1])):
        depth = sum(1 for o in bands if o[0] <= s and e <= o[1] and (o[0], o[1]) != (s, e))
        x0, x1 = panel.px(s), panel.px(e)
        out.append(
            f'<rect class="{cls}" {attrs} data-start="{s}" data-end="{e}" x="{_n(x0)}" '
            f'y="{_n(panel.y)}" width="{_n(max(x1 - x0, 0.5))}" height="{_n(panel.height)}" '
            f'fill="{fill}" fill-opacity="0.35"><title>{escape(label)}: points [{s}, {e})'
            "</title></rect>"
        )
        if x1 - x0 >= _text_width(label, NOTE_FONT) + 4:
            y = panel.y + (depth + 1) * (NOTE_FONT + 2)
            out.append(
                f'<text class="band-label" x="{_n(x0 + 3)}" y="{_n(y)}" '
                f'font-size="{NOTE_FONT}" fill="#555">{escape(label)}</text>'
            )
        if cls not in kinds:
            kinds.append(cls)
    out.append("</g>")
    return kinds


def _curve(panel: _Panel, steps: list[tuple[int, int]]) -> str:
    path = [f"M{_n(panel.px(0))},{_n(panel.py(0))}"]
    for point, value in steps:
        path.append(f"H{_n(panel.px(point))}V{_n(panel.py(value))}")
    path.append(f"H{_n(panel.px(panel.horizon))}")
    return f'<path class="live" d="{"".join(path)}"><title>live bytes</title></path>'


def _hline(panel: _Panel, value: int, cls: str) -> str:
    y = _n(panel.py(value))
    right = _n(panel.x + panel.width)
    name = cls.replace("-", " ")
    return (
        f'<line class="{cls}" data-bytes="{value}" x1="{_n(panel.x)}" y1="{y}" x2="{right}" '
        f'y2="{y}"><title>{name} {value} bytes</title></line>'
    )


def _margin_notes(panel: _Panel, lines: list[tuple[int, str, str]], above: int | None) -> list[str]:
    """Two-line labels (name, then bytes) for the horizontal lines, in the right margin beside
    their lines: equal values share one label, close ones are pushed apart, and a capacity
    above the scale gets a note at the top."""
    merged: dict[int, list[tuple[str, str]]] = {}
    for value, cls, name in sorted(lines, key=lambda line: (-line[0], line[1])):
        merged.setdefault(value, []).append((cls, name))
    notes = [
        (panel.py(value), value, [c for c, _ in group], " = ".join(n for _, n in group))
        for value, group in merged.items()
    ]
    if above is not None:
        notes.insert(0, (panel.y, above, ["capacity-note"], "capacity, off the scale"))
    # Offsets within a label are in em, so a viewer may scale its text alone.
    # Tops, first line's baseline at its line: stack downwards, then lift all from the floor.
    low, high = panel.y + NOTE_FONT / 2, panel.y + panel.height - NOTE_STEP + NOTE_FONT
    tops: list[float] = []
    for y, *_ in notes:
        tops.append(max(y, tops[-1] + NOTE_STEP) if tops else max(y, low))
    if tops and tops[-1] > high:
        shift = tops[-1] - high
        tops = [max(t - shift, low + k * NOTE_STEP) for k, t in enumerate(tops)]
    x = panel.x + panel.width
    out = ['<g class="notes">']
    for (y, value, classes, name), top in zip(notes, tops, strict=True):
        kinds = " ".join(classes)
        out.append(
            f'<line class="leader" x1="{_n(x)}" y1="{_n(y)}" x2="{_n(x + 6)}" '
            f'y2="{_n(top - NOTE_FONT / 3)}" stroke="#888"/>'
            f'<text class="note" data-for="{kinds}" data-bytes="{value}" x="{_n(x + 8)}" '
            f'y="{_n(top)}" dy="0.33em" font-size="{NOTE_FONT}">{escape(name)}'
            f'<tspan x="{_n(x + 8)}" dy="1.2em">{value} B</tspan></text>'
        )
    out.append("</g>")
    return out


_LEGEND = {  # kind -> (mark, text), in legend order
    "barrier-existing": (
        '<line class="barrier existing" x1="0" y1="-8" x2="0" y2="4"/>',
        "existing barrier",
    ),
    "barrier-inserted": (
        '<line class="barrier inserted" x1="0" y1="-8" x2="0" y2="4"/>',
        "inserted barrier",
    ),
    "barrier-caller": (
        '<line class="barrier caller" x1="0" y1="-8" x2="0" y2="4"/>',
        "barrier the caller adds",
    ),
    "loop": (
        f'<rect class="loop" x="-8" y="-8" width="16" height="10" fill="{_LOOP_FILL}"/>',
        "loop body",
    ),
    "arm": (
        f'<rect class="arm" x="-8" y="-8" width="16" height="10" fill="{_ARM_FILLS[0]}"/>',
        "branch arm",
    ),
    "capacity": ('<line class="capacity" x1="-8" y1="-2" x2="8" y2="-2"/>', "capacity"),
    "lower-bound": ('<line class="lower-bound" x1="-8" y1="-2" x2="8" y2="-2"/>', "lower bound"),
    "live": ('<line class="live" x1="-8" y1="-2" x2="8" y2="-2"/>', "live bytes"),
}


def _legend(y: float, drawn: set[str]) -> list[str]:
    """One entry per kind of mark drawn, and none for a kind that is not."""
    out = ['<g class="legend">']
    x = float(LEFT)
    for kind, (mark, text) in _LEGEND.items():
        if kind not in drawn:
            continue
        out.append(
            f'<g class="legend-item" data-kind="{kind}" transform="translate({_n(x + 8)} '
            f'{_n(y)})">{mark}<text x="14" y="2" class="tick">{text}</text></g>'
        )
        x += 34 + _text_width(text)
    out.append("</g>")
    return out


def _n(value: float) -> str:
    """A coordinate with at most two decimals and no trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text
