"""A run's `curves.png`, drawn from its `metrics.jsonl` rows: one figure, one panel per concern.

Each trainer says only what to draw (`Panel`s of `Series`, by metric key); how rows become lines
(every row that has the key, over `step`), smoothing noisy per-step losses and the file's format are
decided here, once. matplotlib is imported when drawing, with the Agg backend: training boxes are headless.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Series:
    """One metric over steps. `smooth`: also draw a moving average over ~1/30 of the points (the raw line
    faint), for per-step training losses."""

    key: str
    label: str | None = None
    style: str = "-"
    marker: str | None = None
    smooth: bool = False


@dataclass(frozen=True)
class Panel:
    title: str
    series: tuple[Series, ...]
    ylabel: str = ""
    log: bool = False


def plot_curves(rows: Sequence[dict[str, Any]], path: Path, panels: Sequence[Panel], dpi: int = 90) -> None:
    """Draw `panels` side by side from metric rows (each a dict with `step`) into `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels) + 0.8, 4), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        for series in panel.series:
            points = [(row["step"], row[series.key]) for row in rows if series.key in row]
            if not points:
                continue
            steps, values = [p[0] for p in points], np.array([p[1] for p in points], float)
            label = series.label or series.key
            if series.smooth:
                k = max(1, len(values) // 30)
                ax.plot(steps, values, series.style, alpha=0.3, label=label)
                ax.plot(
                    steps[k - 1 :], np.convolve(values, np.ones(k) / k, "valid"), label=f"{label} (smoothed)"
                )
            else:
                marker = {"marker": series.marker} if series.marker else {}
                ax.plot(steps, values, series.style, label=label, **marker)
        if panel.log:
            ax.set_yscale("log")
        ax.set(title=panel.title, xlabel="step", ylabel=panel.ylabel)
        if ax.lines:
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
