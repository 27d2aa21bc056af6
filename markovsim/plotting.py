"""matplotlib figures for sweeps, breakdowns, distributions, timelines and validation reports.

Plotting stays out of the compute code: these helpers take results (an ``xarray.Dataset``
from :func:`markovsim.sweep`, plain mappings and arrays, a validation report) and draw them
on a matplotlib ``Axes``. matplotlib is imported only when a function is called (install
it with ``pip install 'markovsim[plot]'``). Each function returns the ``Axes`` it drew on,
so figures can be combined and styled further.

Example:
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import jax.numpy as jnp
    >>> import markovsim as ms
    >>> from markovsim import plotting
    >>> ds = ms.sweep(lambda interval_s, mtbf_h: jnp.exp(-interval_s / (mtbf_h * 3600.0)),
    ...               interval_s=[600.0, 1800.0], mtbf_h=[2.0, 24.0])
    >>> ax = plotting.plot_sweep(ds, "value", x="interval_s")
    >>> len(ax.get_lines())
    2
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = [
    "plot_sweep",
    "plot_sweep_map",
    "plot_breakdown",
    "plot_distribution",
    "plot_timeline",
    "plot_validation",
    "plot_validation_errors",
]


def _axes(ax):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    return ax


def _check_dims(ds, variable: str, wanted: Sequence[str]):
    if variable not in ds.data_vars:
        raise ValueError(f"variable={variable!r}: not in the Dataset; expected one of {list(ds.data_vars)}")
    dims = ds[variable].dims
    for name in wanted:
        if name not in dims:
            raise ValueError(f"{name!r}: not one of the dims {dims} of {variable!r}")
    return dims


def _label(name: str, ds) -> str:
    units = ds[name].attrs.get("units") if name in ds.variables else None
    return f"{name} [{units}]" if units else name


def _value(v) -> str:
    """A coordinate value in a legend: a number as ``g``, a name as it is."""
    return str(v) if isinstance(v, (str, np.str_)) else f"{v:g}"


def plot_sweep(ds, variable: str, *, x: str, ax=None, logx: bool = False):
    """One line of ``variable`` against ``x`` for every combination of the other dims.

    Points whose ``status`` is non-zero are left out (drawn as gaps).

    Args:
        ds: a Dataset from :func:`markovsim.sweep`.
        variable: the output to draw.
        x: the dim along the horizontal axis.
        ax: matplotlib Axes to draw on (a new figure when omitted).
        logx: logarithmic horizontal axis.

    Returns:
        The matplotlib Axes.
    """
    dims = _check_dims(ds, variable, [x])
    ax = _axes(ax)
    data = ds[variable]
    if "status" in ds.data_vars:
        data = data.where(ds["status"] == 0)
    others = [d for d in dims if d != x]
    xs = ds[x].values
    named = xs.dtype.kind in "US"
    for combo in itertools.product(*(range(ds.sizes[d]) for d in others)):
        sel = dict(zip(others, combo))
        line = data.isel(sel)
        label = ", ".join(f"{d}={_value(ds[d].values[i])}" for d, i in sel.items()) or None
        # an axis of names (a --vary over choices) is drawn at its positions, named
        ax.plot(np.arange(xs.size) if named else xs, line.transpose(x).values, marker=".", label=label)
    if named:
        ax.set_xticks(np.arange(xs.size), [str(v) for v in xs])
    ax.set_xlabel(_label(x, ds))
    ax.set_ylabel(_label(variable, ds))
    if logx:
        ax.set_xscale("log")
    if others:
        ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)
    return ax


def plot_sweep_map(ds, variable: str, *, x: str, y: str, ax=None):
    """A colour map of ``variable`` over two dims (the others must have length 1).

    Args:
        ds: a Dataset from :func:`markovsim.sweep`.
        variable: the output to draw.
        x: dim along the horizontal axis.
        y: dim along the vertical axis.
        ax: matplotlib Axes to draw on (a new figure when omitted).

    Returns:
        The matplotlib Axes.
    """
    dims = _check_dims(ds, variable, [x, y])
    extra = [d for d in dims if d not in (x, y) and ds.sizes[d] > 1]
    if extra:
        raise ValueError(f"plot_sweep_map: dims {extra} have more than one value; select one with ds.isel(...)")
    ax = _axes(ax)
    data = ds[variable]
    if "status" in ds.data_vars:
        data = data.where(ds["status"] == 0)
    values = data.squeeze([d for d in dims if d not in (x, y)]).transpose(y, x).values
    mesh = ax.pcolormesh(ds[x].values, ds[y].values, values, shading="auto")
    ax.figure.colorbar(mesh, ax=ax, label=_label(variable, ds))
    ax.set_xlabel(_label(x, ds))
    ax.set_ylabel(_label(y, ds))
    return ax


def plot_breakdown(parts: Mapping[str, float], *, unit: str = "", ax=None):
    """Horizontal bars of a breakdown, e.g. where the lost time of a training job goes.

    Args:
        parts: name -> amount (for example fraction of wall time per loss cause).
        unit: unit of the amounts, shown on the axis.
        ax: matplotlib Axes to draw on (a new figure when omitted).

    Returns:
        The matplotlib Axes.
    """
    ax = _axes(ax)
    names = list(parts)
    values = np.array([float(parts[n]) for n in names])
    ax.barh(names, values)
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    for i, v in enumerate(values):
        ax.annotate(f"{v:.3g}", (v, i), xytext=(3, 0), textcoords="offset points", va="center",
                    fontsize="small")
    return ax


def plot_distribution(values: Sequence[float], probabilities: Sequence[float], *,
                      xlabel: str = "", ax=None):
    """Bars of a discrete distribution, e.g. the number of serving instances in a fleet.

    Args:
        values: the support.
        probabilities: probability of each value (sums to 1).
        xlabel: label of the horizontal axis.
        ax: matplotlib Axes to draw on (a new figure when omitted).

    Returns:
        The matplotlib Axes.
    """
    values = np.asarray(values, dtype=float)
    probabilities = np.asarray(probabilities, dtype=float)
    if values.shape != probabilities.shape or values.ndim != 1:
        raise ValueError(
            f"plot_distribution: values {values.shape} and probabilities {probabilities.shape} "
            "must be 1-D of the same length"
        )
    ax = _axes(ax)
    ax.bar(values, probabilities, width=0.8 * (np.min(np.diff(values)) if len(values) > 1 else 1.0))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("probability")
    ax.set_yscale("log")
    return ax


def plot_timeline(bars: Sequence[tuple[Any, float, float, str]], *, unit: str = "s", ax=None):
    """A timeline (Gantt chart), e.g. a pipeline schedule or a recovery sequence.

    Args:
        bars: ``(row, start, duration, kind)`` tuples; rows are labels (stage, rank, ...), one
            colour per ``kind`` (``"forward"``, ``"backward"``, ``"recover"``, ...).
        unit: time unit of ``start`` and ``duration``.
        ax: matplotlib Axes to draw on (a new figure when omitted).

    Returns:
        The matplotlib Axes.
    """
    ax = _axes(ax)
    rows = list(dict.fromkeys(b[0] for b in bars))
    kinds = list(dict.fromkeys(b[3] for b in bars))
    colours = {k: f"C{i}" for i, k in enumerate(kinds)}
    for row, start, duration, kind in bars:
        ax.broken_barh([(start, duration)], (rows.index(row) - 0.4, 0.8), facecolors=colours[kind],
                       edgecolor="white", linewidth=0.5)
    ax.set_yticks(range(len(rows)), [str(r) for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel(f"time [{unit}]")
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color=c, label=k) for k, c in colours.items()], fontsize="small",
              loc="upper right")
    return ax


def plot_validation_errors(report, *, ax=None):
    """The signed error of every row of a validation report, one line per row: relative
    error in % (rows with a tolerance in points: their error in points), holdout / check
    rows and fit rows marked apart, with the file's targets as dashed bands.

    Unlike :func:`plot_validation`, which sets outputs of different units on one axis, this
    reads the same for step times, MFU and throughputs.

    Args:
        report: a :class:`~markovsim.validate.ValidationReport`.
        ax: matplotlib Axes to draw on (a new figure when omitted).

    Returns:
        The matplotlib Axes.
    """
    ax = _axes(ax)
    rows = list(report.rows)
    y = np.arange(len(rows))[::-1]
    err = np.array([100 * (r.predicted - r.reported) if r.points else 100 * r.error for r in rows], dtype=float)
    styles = {"fit": dict(marker="s", color="grey", label="fit (calibration)"),
              "holdout": dict(marker="o", color="C0", label="holdout"),
              "check": dict(marker="o", color="C2", label="check")}
    for role, style in styles.items():
        for points, mark in ((False, style["marker"]), (True, "D")):
            sel = np.array([r.role == role and r.points == points for r in rows], dtype=bool)
            if sel.any():
                label = style["label"] + (" (points)" if points else " (%)")
                ax.scatter(err[sel], y[sel], marker=mark, color=style["color"], label=label, zorder=3)
    failed = np.array([not r.passed for r in rows], dtype=bool)
    if failed.any():
        ax.scatter(err[failed], y[failed], s=120, facecolors="none", edgecolors="C3", label="outside tolerance",
                   zorder=2)
    ax.axvline(0.0, color="black", lw=0.8)
    targets = getattr(report, "targets", {}) or {}
    for key, ls in (("max", "--"), ("points", ":")):
        if key in targets:
            lim = 100 * targets[key]
            ax.axvspan(-lim, lim, color="C0" if key == "max" else "C1", alpha=0.08)
            ax.axvline(-lim, color="grey", ls=ls, lw=0.8)
            ax.axvline(lim, color="grey", ls=ls, lw=0.8,
                       label=f"target: max {lim:g} %" if key == "max" else f"target: {lim:g} points")
    ax.set_yticks(y)
    short = lambda t: t if len(t) <= 60 else f"{t[:24]}...{t[-33:]}"  # noqa: E731  (keep the sizes at the end)
    ax.set_yticklabels([f"{short(r.case)} [{r.output}]" for r in rows], fontsize=6)
    ax.set_xlabel("predicted - reported: relative error (%), or points for shares")
    ax.legend(fontsize="x-small", loc="lower right")
    # one line per row: grow a figure too small to hold them (never shrink one)
    fig = ax.figure
    w, h = fig.get_size_inches()
    fig.set_size_inches(max(w, 9.0), max(h, 0.2 * len(rows) + 1.5))
    if fig.get_layout_engine() is None:   # a figure with its own layout engine keeps it
        fig.tight_layout()
    return ax


def plot_validation(report, *, ax=None):
    """Predicted against reported values of a validation report, with the line y = x.

    Args:
        report: a :class:`~markovsim.validate.ValidationReport` (from
            ``markovsim.validate.validate_cases``).
        ax: matplotlib Axes to draw on (a new figure when omitted).

    Returns:
        The matplotlib Axes.
    """
    ax = _axes(ax)
    rows = list(report.rows)
    reported = np.array([r.reported for r in rows], dtype=float)
    predicted = np.array([r.predicted for r in rows], dtype=float)
    passed = np.array([r.passed for r in rows], dtype=bool)
    ax.scatter(reported[passed], predicted[passed], label="within tolerance")
    ax.scatter(reported[~passed], predicted[~passed], marker="x", color="C3", label="outside tolerance")
    finite = np.concatenate([reported, predicted])
    finite = finite[np.isfinite(finite)]
    if finite.size:
        lo, hi = finite.min(), finite.max()
        ax.plot([lo, hi], [lo, hi], color="grey", lw=1, ls="--", label="predicted = reported")
    ax.set_xlabel("reported")
    ax.set_ylabel("predicted")
    ax.legend(fontsize="small")
    return ax
