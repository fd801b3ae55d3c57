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
_QUANTITY = {
    "positions": ("q", "", "positions"),
    "velocities": ("qd", "/s", "velocities"),
    "accelerations": ("qdd", "/s²", "accelerations"),
}


def _grid(k: int, title: str, width: float = 11.0):
    cols = 1 if k == 1 else 2 if k <= 4 else 3
    rows = math.ceil(k / cols)
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(width, 1.2 + 2.4 * rows),
        squeeze=False,
        sharex=True,
        constrained_layout=True,
    )
    for ax in axes.flat[k:]:
        ax.set_visible(False)
    fig.suptitle(title)
    return fig, list(axes.flat[:k])


def _finish(fig, axes, path: Path, legend: bool):
    for ax in axes:
        ax.grid(True, alpha=0.3)
    if legend:
        axes[0].legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def coordinates(model, runs: dict, kind: str, path: Path, title: str) -> None:
    """Positions, velocities or accelerations: one panel per coordinate."""
    field, suffix, noun = _QUANTITY[kind]
    dots = {"q": "", "qd": "'", "qdd": "''"}[field]
    fig, axes = _grid(len(model.coordinates), f"{title} — {noun}")
    for label, run in runs.items():
        for i, ax in enumerate(axes):
            ax.plot(run["ts"], run[field][:, i], lw=1.0, label=label)
    for ax, name, unit in zip(axes, model.coordinates, model.units, strict=True):
        ax.set_ylabel(f"{name}{dots}  [{unit}{suffix}]")
    for ax in axes[-2:]:
        ax.set_xlabel("t [s]")
    _finish(fig, axes, path, len(runs) > 1)


def multipliers(model, runs: dict, path: Path, title: str) -> None:
    """The Lagrange multipliers (constraint forces), one panel per constraint."""
    names = model.constraint_names
    fig, axes = _grid(len(names), f"{title} — constraint forces (multipliers λ)")
    for label, run in runs.items():
        for i, ax in enumerate(axes):
            ax.plot(run["ts"], run["multipliers"][:, i], lw=1.0, label=label)
    for ax, name in zip(axes, names, strict=True):
        ax.set_ylabel(f"λ  ({name})")
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
    """Energy (the Jacobi integral) relative to its initial value."""
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
    axes[1].set(title="drift", ylabel="E(t) − E(0)  [J]")
    for ax in axes:
        ax.set_xlabel("t [s]")
    fig.suptitle(f"{title} — energy (Jacobi integral; constant if conservative)")
    _finish(fig, list(axes), path, True)


def animate(model, runs: dict, path: Path, title: str, fps: int) -> None:
    """The mechanism of each run side by side, with constraint-force arrows.

    Each run's data holds `frame_ts` (F,), `points` (F, k, 2) and, if forces are
    drawn, `force_points` and `forces` (F, j, 2). Arrows share one scale: the
    largest force is drawn 0.4 times the mechanism's size. `trail_ts`, `trail`:
    the path of the last point at every saved time.
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
    has_forces = all("forces" in runs[k] for k in labels)
    scale = 1.0
    if has_forces:
        biggest = max(
            float(np.nanmax(np.linalg.norm(runs[k]["forces"], axis=-1))) for k in labels
        )
        scale = 0.4 * size / biggest if biggest > 0 else 1.0

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
            for line, (a, b) in zip(links, model.segments, strict=True):
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
