"""Small server-side SVG charts for the staff dashboard: no JavaScript, no CDN, nothing to
vendor. Every value written into the markup is a number or escaped text."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import count

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 640, 170
LEFT, RIGHT, TOP, BOTTOM = 56, 10, 12, 24

_ids = count(1)


def _nice_max(value: float) -> float:
    """The axis top: ``value`` rounded up to 1, 2 or 5 times a power of ten (at least 1)."""
    if value <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if value <= step * power:
            return float(step * power)
    return float(10 * power)


def _label(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def time_chart_svg(
    *,
    title: str,
    values: Sequence[float | None],
    unit: str,
    bars: bool = False,
    span_minutes: int = 60,
) -> SafeString:
    """A chart of ``values`` (oldest first, evenly spaced over the last ``span_minutes``) as a
    line (gaps where a value is None) or as bars. Its text alternative names the latest and the
    highest value."""
    chart_id = f"chart-{next(_ids)}"
    known = [v for v in values if v is not None]
    top = _nice_max(max(known, default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    n = max(len(values), 1)
    step = plot_w / n

    def x(i: int) -> float:
        return LEFT + step * i + step / 2

    def y(v: float) -> float:
        return TOP + plot_h - (v / top) * plot_h

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-labelledby="{chart_id}-t {chart_id}-d" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{chart_id}-t">{escape(title)}</title>',
    ]
    latest = next((v for v in reversed(values) if v is not None), None)
    summary = (
        "no data in the last hour"
        if latest is None
        else f"latest {_label(latest)} {unit}, highest {_label(max(known))} {unit}"
    )
    parts.append(f'<desc id="{chart_id}-d">{escape(summary)}</desc>')
    for fraction in (0, 0.5, 1):
        gy = TOP + plot_h - fraction * plot_h
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{gy:.1f}" y2="{gy:.1f}" class="grid"/>'
            f'<text x="{LEFT - 6}" y="{gy + 4:.1f}" text-anchor="end">'
            f"{escape(_label(top * fraction))}</text>"
        )
    for minutes, anchor, px in (
        (span_minutes, "start", LEFT),
        (span_minutes // 2, "middle", LEFT + plot_w / 2),
        (0, "end", WIDTH - RIGHT),
    ):
        text = "now" if minutes == 0 else f"-{minutes} min"
        parts.append(f'<text x="{px:.1f}" y="{HEIGHT - 6}" text-anchor="{anchor}">{text}</text>')
    if bars:
        width = max(step * 0.7, 1)
        for i, v in enumerate(values):
            if v:
                parts.append(
                    f'<rect class="bar" x="{x(i) - width / 2:.1f}" y="{y(v):.1f}" '
                    f'width="{width:.1f}" height="{TOP + plot_h - y(v):.1f}"/>'
                )
    else:
        segment: list[str] = []
        segments: list[list[str]] = []
        for i, v in enumerate(values):
            if v is None:
                if segment:
                    segments.append(segment)
                segment = []
            else:
                segment.append(f"{x(i):.1f},{y(v):.1f}")
        if segment:
            segments.append(segment)
        for seg in segments:
            if len(seg) == 1:
                cx, cy = seg[0].split(",")
                parts.append(f'<circle class="dot" cx="{cx}" cy="{cy}" r="3"/>')
            else:
                parts.append(f'<polyline class="line" points="{" ".join(seg)}"/>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 -- numbers and escaped text only
