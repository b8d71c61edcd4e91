"""Server-rendered SVG: the overview's sparklines and the queue page's bar charts.

Every number is formatted here and every label escaped, so the result is
safe to embed as :class:`markupsafe.Markup`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from markupsafe import Markup, escape

__all__ = ["Series", "bar_chart", "sparkline"]


@dataclass(frozen=True)
class Series:
    """One stacked part of a bar chart: its name, CSS class and a value per bucket."""

    name: str
    css_class: str
    values: Sequence[float]


def sparkline(values: Sequence[float], *, width: int = 120, height: int = 24) -> Markup:
    """A line of ``values`` scaled from 0 to their maximum (flat at the bottom when all 0)."""
    count = len(values)
    top = max(values, default=0.0)
    if count == 0:
        points = f"0,{height - 1} {width},{height - 1}"
    else:
        step = width / max(count - 1, 1)
        points = " ".join(f"{i * step:.1f},{_y(v, top, height):.1f}" for i, v in enumerate(values))
    label = escape(f"{count} buckets, peak {top:g}")
    return Markup(
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
        f' role="img" aria-label="{label}"><polyline points="{points}" fill="none"'
        f' stroke="currentColor" stroke-width="1.5"/></svg>'
    )


def _y(value: float, top: float, height: int) -> float:
    usable = height - 2
    return height - 1 - (value / top * usable if top > 0 else 0.0)


def bar_chart(
    title: str,
    starts: Sequence[datetime],
    series: Sequence[Series],
    *,
    unit: str,
    width: int = 640,
    height: int = 160,
) -> Markup:
    """Bars per bucket (series stacked), the peak on the y axis and the first and
    last bucket's times below; each bar has a tooltip with its figures."""
    pad_left, pad_bottom, pad_top = 48, 18, 8
    plot_w, plot_h = width - pad_left - 4, height - pad_bottom - pad_top
    count = len(starts)
    totals = [sum(s.values[i] for s in series) for i in range(count)]
    top = max(totals, default=0.0)
    parts = [
        f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
        f' role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<line class="axis" x1="{pad_left}" y1="{pad_top + plot_h}" x2="{width - 4}"'
        f' y2="{pad_top + plot_h}"/>',
        f'<text class="tick" x="{pad_left - 4}" y="{pad_top + 8}" text-anchor="end">'
        f"{escape(_figure(top))}</text>",
        f'<text class="tick" x="{pad_left - 4}" y="{pad_top + plot_h}" text-anchor="end">0</text>',
    ]
    if count:
        slot = plot_w / count
        bar_w = max(slot * 0.8, 1.0)
        for i, start in enumerate(starts):
            x = pad_left + i * slot + (slot - bar_w) / 2
            base = float(pad_top + plot_h)
            tip = ", ".join(f"{s.name} {_figure(s.values[i])}" for s in series)
            parts.append(f"<g><title>{escape(f'{start:%H:%M}: {tip} {unit}')}</title>")
            for s in series:
                h = s.values[i] / top * plot_h if top > 0 else 0.0
                if h <= 0:
                    continue
                base -= h
                parts.append(
                    f'<rect class="{escape(s.css_class)}" x="{x:.1f}" y="{base:.1f}"'
                    f' width="{bar_w:.1f}" height="{h:.1f}"/>'
                )
            parts.append("</g>")
        y_text = height - 4
        parts.append(
            f'<text class="tick" x="{pad_left}" y="{y_text}">{escape(f"{starts[0]:%H:%M}")}</text>'
        )
        parts.append(
            f'<text class="tick" x="{width - 4}" y="{y_text}" text-anchor="end">'
            f"{escape(f'{starts[-1]:%H:%M}')}</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _figure(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"
