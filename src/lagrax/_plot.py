"""Figures and animations of simulated runs, for the `lagrax` command.

Each function takes the Model (names and units) and a dict label -> run data
(NumPy arrays named as the Trajectory's fields), draws one line per run, and
writes one file. Matplotlib is imported here only, with the Agg backend.
"""

import math
from pathlib import Path

import matplotlib


matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402


_FLOOR = 1e-17  # residuals below this (round-off, exact zeros) are drawn at it
# A panel whose values stay within this fraction of the largest value of its
# quantity (all panels of the figure, all runs) is drawn as constant.
_FLAT = 1e-9
_QUANTITY = {
    "positions": ("q", "", "positions"),
    "velocities": ("qd", "/s", "velocities"),
    "accelerations": ("qdd", "/s²", "accelerations"),
}


def _grid(k: int, title: str, width: float = 11.0):
    cols = 1 if k == 1 else 2 if k <= 4 else 3
    rows = math.ceil(k / cols)
    # The constrained layout solver costs about as much as drawing itself; for
    # tall grids of like panels fixed margins do as well.
    fixed = rows > 4
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(width, 1.2 + 2.4 * rows),
        squeeze=False,
        sharex=True,
        constrained_layout=not fixed,
    )
    for ax in axes.flat[k:]:
        ax.set_visible(False)
    if fixed:
        height = 1.2 + 2.4 * rows
        fig.suptitle(title, y=1 - 0.3 / height)
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.5 / height,
                            top=1 - 0.9 / height, wspace=0.3, hspace=0.15)  # fmt: skip
    else:
        fig.suptitle(title)
    return fig, list(axes.flat[:k])


def _finish(fig, axes, path: Path, legend: bool):
    for ax in axes:
        ax.grid(True, alpha=0.3)
    if legend:
        axes[0].legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def flat_panels(values: list, units) -> list:
    """Which columns of a figure are constant, and how to draw them.

    A column (one panel: a coordinate, a multiplier) is constant when all its
    finite values, over all runs, lie within `_FLAT` times the scale of its
    quantity, the largest |value| of any column: a variation below that is
    round-off (y of a block on a track, 1e-16 m), which an autoscaled axis would
    blow up to fill the panel. Its axis gets the height of the narrowest
    non-constant column with the same unit (else 10 % of its value, else 1), so
    it looks flat at the finest scale of the run's motion.

    **Arguments:**

    - `values`: arrays (T, k), one per run (T may differ).
    - `units`: the k columns' units (columns of one unit share a scale).

    **Returns:**

    One entry per column: None where it is not constant, else (centre, spread,
    half): its value (0 where it is within the tolerance of 0), max - min, and
    the half-height of its axis.
    """
    values = [np.asarray(v, dtype=float).reshape(len(v), -1) for v in values]
    k = len(units)
    columns = [np.concatenate([v[:, i] for v in values]) for i in range(k)]
    columns = [c[np.isfinite(c)] for c in columns]
    sizes = [float(np.abs(c).max()) if c.size else 0.0 for c in columns]
    tolerance = _FLAT * max(sizes, default=0.0)
    spreads = [float(np.ptp(c)) if c.size else math.inf for c in columns]
    flat = [s <= tolerance for s in spreads]
    out = []
    for i, c in enumerate(columns):
        if not flat[i]:
            out.append(None)
            continue
        centre = float((c.max() + c.min()) / 2)
        centre = 0.0 if abs(centre) <= tolerance else centre
        siblings = [
            spreads[j]
            for j in range(k)
            if units[j] == units[i] and not flat[j] and math.isfinite(spreads[j])
        ]
        half = 0.55 * min(siblings) if siblings else 0.1 * abs(centre) or 1.0
        out.append((centre, spreads[i], half))
    return out


def _draw_flat(ax, flat, unit: str) -> None:
    centre, spread, half = flat
    ax.set_ylim(centre - half, centre + half)
    ax.ticklabel_format(axis="y", useOffset=False)
    varies = "exactly" if spread == 0 else f"varies by {spread:.1g}"
    value = f"{centre:.6g} {unit}".strip()
    ax.text(
        0.98, 0.94, f"constant {value} ({varies})", transform=ax.transAxes,
        ha="right", va="top", fontsize=8, color="0.3",
    )  # fmt: skip


def coordinates(model, runs: dict, kind: str, path: Path, title: str) -> None:
    """Positions, velocities or accelerations: one panel per coordinate.

    A coordinate that stays constant (to round-off, see `flat_panels`) is drawn
    flat and labelled so, not as noise blown up by the autoscale.
    """
    field, suffix, noun = _QUANTITY[kind]
    dots = {"q": "", "qd": "'", "qdd": "''"}[field]
    fig, axes = _grid(len(model.coordinates), f"{title} — {noun}")
    for label, run in runs.items():
        for i, ax in enumerate(axes):
            ax.plot(run["ts"], run[field][:, i], lw=1.0, label=label)
    units = [f"{unit}{suffix}" for unit in model.units]
    flats = flat_panels([run[field] for run in runs.values()], units)
    for ax, name, unit, flat in zip(axes, model.coordinates, units, flats, strict=True):
        ax.set_ylabel(f"{name}{dots}  [{unit}]")
        if flat is not None:
            _draw_flat(ax, flat, unit)
    for ax in axes[-2:]:
        ax.set_xlabel("t [s]")
    _finish(fig, axes, path, len(runs) > 1)


def multipliers(model, runs: dict, path: Path, title: str) -> None:
    """The Lagrange multipliers (constraint forces), one panel per constraint,
    in the model's `multiplier_units` where it gives them."""
    names = model.constraint_names
    units = tuple(model.multiplier_units) or ("",) * len(names)
    if len(units) != len(names):
        raise ValueError(
            f"model {model.name!r}: multiplier_units has {len(units)} entries for "
            f"{len(names)} constraints; give one unit per constraint (or none)."
        )
    fig, axes = _grid(len(names), f"{title} — constraint forces (multipliers λ)")
    for label, run in runs.items():
        for i, ax in enumerate(axes):
            ax.plot(run["ts"], run["multipliers"][:, i], lw=1.0, label=label)
    flats = flat_panels([run["multipliers"] for run in runs.values()], units)
    for ax, name, unit, flat in zip(axes, names, units, flats, strict=True):
        ax.set_ylabel(f"λ  ({name})" + (f"  [{unit}]" if unit else ""))
        if flat is not None:
            _draw_flat(ax, flat, unit)
    for ax in axes[-2:]:
        ax.set_xlabel("t [s]")
    _finish(fig, axes, path, len(runs) > 1)


def residuals(model, runs: dict, path: Path, title: str) -> None:
    """max |phi| and max |phi_dot| over the constraints, on log axes."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for label, run in runs.items():
        for ax, field in zip(axes, ("phi", "phi_dot"), strict=True):
            worst = np.abs(run[field]).max(axis=1)
            ax.semilogy(run["ts"], np.maximum(worst, _FLOOR), lw=1.0, label=label)
    axes[0].set(title="position constraints", ylabel="max |φ(t, q)|")
    axes[1].set(title="velocity constraints", ylabel="max |J q' + φ_t|")
    for ax in axes:
        ax.set_xlabel(f"t [s]   (values below {_FLOOR:g} drawn at {_FLOOR:g})")
    fig.suptitle(f"{title} — constraint residuals")
    _finish(fig, list(axes), path, True)


def energy(model, runs: dict, path: Path, title: str) -> None:
    """Energy (the Jacobi integral) relative to its initial value.

    For a conservative run (`model.is_conservative` under the run's `params`)
    E(t) - E(0) is the numerical drift; otherwise it is the work done by the
    non-conservative forces and the drives (rheonomic constraints, an explicitly
    time-dependent Lagrangian), and labelled so.
    """
    kept = [model.is_conservative(run.get("params")) for run in runs.values()]
    if all(kept):
        change = ("numerical drift", "E(t) − E(0)  [J]")
        note = "conservative: constant up to numerical drift"
    elif not any(kept):
        change = ("work done by the forces and drives", "W(t) = E(t) − E(0)  [J]")
        note = "not conservative: changes by the work of the forces and drives"
    else:
        change = ("drift, or work done where not conservative", "E(t) − E(0)  [J]")
        note = "conservative only in some runs"
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for label, run in runs.items():
        e = run["energy"]
        axes[0].plot(run["ts"], e, lw=1.0, label=label)
        axes[1].plot(run["ts"], e - e[0], lw=1.0, label=label)
    # Show E(t) at a scale where a conserved energy looks flat (at least 0.1 %
    # of its size); the drift panel resolves the small changes.
    every = np.concatenate([run["energy"] for run in runs.values()])
    middle = (every.max() + every.min()) / 2
    half = max(every.max() - middle, 1e-3 * abs(middle), 1e-12)
    axes[0].set_ylim(middle - 1.1 * half, middle + 1.1 * half)
    axes[0].ticklabel_format(axis="y", useOffset=False)
    axes[0].set(title="energy", ylabel="E(t)  [J]")
    axes[1].set(title=change[0], ylabel=change[1])
    for ax in axes:
        ax.set_xlabel("t [s]")
    fig.suptitle(f"{title} — energy (Jacobi integral; {note})")
    _finish(fig, list(axes), path, True)


def zigzag(a, b, width: float, coils: int = 6) -> np.ndarray:
    """The polyline of a coil spring from point `a` to point `b`, shape (2 coils
    + 4, 2).

    Straight leads over the first and last tenth of the length, and between
    them 2 `coils` corners alternately `width` / 2 to either side of the line,
    evenly spaced: the width stays as the spring stretches, as a real coil's
    does. Where a and b coincide (or are not finite) it collapses onto a-b.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = b - a
    length = float(np.hypot(d[0], d[1]))
    if not math.isfinite(length) or length == 0.0:
        return np.stack([a, a, *([a] * (2 * coils)), b, b])
    across = np.array([-d[1], d[0]]) / length
    corners = 2 * coils
    s = 0.1 + 0.8 * (np.arange(corners) + 0.5) / corners
    side = np.where(np.arange(corners) % 2 == 0, 0.5, -0.5) * width
    middle = a + s[:, None] * d + side[:, None] * across
    return np.concatenate([[a, a + 0.1 * d], middle, [a + 0.9 * d, b]])


def animate(model, runs: dict, path: Path, title: str, fps: int) -> None:
    """The mechanism of each run side by side, with constraint-force arrows.

    Each run's data holds `frame_ts` (F,), `points` (F, k, 2) and, if forces are
    drawn, `force_points` and `forces` (F, j, 2). Arrows share one scale: the
    upper quartile of the forces' sizes is drawn 0.3 times the mechanism's size.
    Scaling by the largest would shrink most arrows to dots where forces peak
    briefly (a fast slider-crank peaks at 10 times its upper quartile); peaks
    are drawn long instead, clipped at the panel's edge. `trail_ts`, `trail`:
    the path of the last point at every saved time. The model's `segments` are
    drawn as links, its `springs` as zig-zag coils (see `zigzag`) of one width,
    6 % of the mechanism's size.
    """
    labels = list(runs)
    fig, axes = plt.subplots(
        1, len(labels), figsize=(4.6 * len(labels), 4.8), squeeze=False
    )  # fmt: skip
    axes = list(axes.flat)
    every = np.concatenate([runs[k]["points"].reshape(-1, 2) for k in labels])
    every = every[np.all(np.isfinite(every), axis=1)]
    low, high = every.min(axis=0), every.max(axis=0)
    size = float(np.max(high - low)) or 1.0
    centre = (low + high) / 2
    half = 0.6 * size + 0.05
    coil = 0.06 * size
    pairs = (*model.segments, *model.springs)
    is_spring = [False] * len(model.segments) + [True] * len(model.springs)
    has_forces = all("forces" in runs[k] for k in labels)
    scale = 1.0
    if has_forces:
        sizes = np.concatenate(
            [np.linalg.norm(runs[k]["forces"], axis=-1).ravel() for k in labels]
        )
        sizes = sizes[np.isfinite(sizes) & (sizes > 0)]
        typical = float(np.percentile(sizes, 75)) if sizes.size else 0.0
        scale = 0.3 * size / typical if typical > 0 else 1.0

    artists = []
    for ax, label in zip(axes, labels, strict=True):
        ax.set_xlim(centre[0] - half, centre[0] + half)
        ax.set_ylim(centre[1] - half, centre[1] + half)
        ax.set_aspect("equal")
        ax.grid(True, alpha=0.3)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("x [m]")
        ax.set_ylabel("y [m]")
        links = [ax.plot([], [], "-", color="0.25", lw=3)[0] for _ in model.segments]
        links += [ax.plot([], [], "-", color="C2", lw=1.5)[0] for _ in model.springs]
        (dots,) = ax.plot([], [], "o", color="C0", ms=7)
        (trail,) = ax.plot([], [], "-", color="C1", lw=0.8, alpha=0.7)
        clock = ax.text(0.02, 0.96, "", transform=ax.transAxes, va="top")
        arrows = None
        if has_forces:
            f0 = runs[label]["force_points"][0]
            arrows = ax.quiver(
                f0[:, 0], f0[:, 1], np.zeros(len(f0)), np.zeros(len(f0)),
                angles="xy", scale_units="xy", scale=1.0, color="C3", width=0.008,
            )  # fmt: skip
        artists.append((links, dots, trail, clock, arrows))
    if has_forces:
        title += f"\nred arrows: constraint forces, drawn {scale:.3g} m per N"
    fig.suptitle(title, fontsize=11)
    # Lay out once: a layout engine would run again for every frame.
    fig.tight_layout()
    frames = len(runs[labels[0]]["frame_ts"])
    span = runs[labels[0]]["frame_ts"]
    window = 0.15 * (span[-1] - span[0])  # the trail of the last point

    moving = [a for group in artists for a in (*group[0], *group[1:4], group[4])]
    moving = [a for a in moving if a is not None]
    for artist in moving:
        artist.set_animated(True)
    # Draw the still parts (axes, ticks, titles) once and only the moving
    # artists per frame: ten times faster than redrawing the whole figure.
    fig.set_dpi(100)
    fig.canvas.draw()
    background = fig.canvas.copy_from_bbox(fig.bbox)

    def render(i):
        fig.canvas.restore_region(background)
        for label, (links, dots, trail, clock, arrows) in zip(
            labels, artists, strict=True
        ):
            run = runs[label]
            pts = run["points"][i]
            for line, (a, b), spring in zip(links, pairs, is_spring, strict=True):
                if spring:
                    line.set_data(*zigzag(pts[a], pts[b], coil).T)
                else:
                    line.set_data([pts[a, 0], pts[b, 0]], [pts[a, 1], pts[b, 1]])
            dots.set_data(pts[:, 0], pts[:, 1])
            t = run["frame_ts"][i]
            recent = (run["trail_ts"] <= t) & (run["trail_ts"] >= t - window)
            trail.set_data(run["trail"][recent, 0], run["trail"][recent, 1])
            clock.set_text(f"t = {t:.2f} s")
            if arrows is not None:
                arrows.set_offsets(run["force_points"][i])
                vec = scale * run["forces"][i]
                arrows.set_UVC(vec[:, 0], vec[:, 1])
        for artist in moving:
            artist.axes.draw_artist(artist)
        return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()

    # One palette for all frames (from a few of them, so that every colour is
    # in it) lets the GIF store only what changed between frames.
    sample = [render(i) for i in (frames // 3, 2 * frames // 3, frames - 1)]
    palette = Image.fromarray(np.concatenate(sample)).quantize(colors=64)
    images = [
        Image.fromarray(render(i)).quantize(palette=palette, dither=Image.Dither.NONE)
        for i in range(frames)
    ]
    plt.close(fig)
    images[0].save(
        path, save_all=True, append_images=images[1:], duration=1000 / fps, loop=0
    )
