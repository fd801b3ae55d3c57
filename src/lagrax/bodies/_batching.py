"""Evaluate alike parts (bodies, joints) together, in one vmapped call.

A chain of N identical links assembled part by part would trace N copies of the
same small computation: the graph, the compile time and the number of tiny XLA
kernels grow with N. Parts that differ only in which coordinates they read are
grouped instead: each group is one template on local coordinates (its bodies
re-indexed to 0, size, ...), evaluated under vmap over the gathered coordinate
slices of its members, and the rows are put back in the parts' order.
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._body import AbstractBody, PlanarBody, SpatialBody
from ._joints import Driver, Fixed, KnifeEdge, Prismatic, Revolute


# Parts that read q only through their bodies (user callbacks see t and params
# at most), so that local coordinates are all they need.
_LOCAL = (PlanarBody, SpatialBody, Revolute, Prismatic, Fixed, Driver, KnifeEdge)


def _is_body(x) -> bool:
    return isinstance(x, AbstractBody)


def _localize(part, n: int):
    """(template on local coordinates, the global indices they come from)."""
    if not isinstance(part, _LOCAL):
        return part, tuple(range(n))
    bodies = {}
    for leaf in jax.tree.leaves(part, is_leaf=_is_body):
        if _is_body(leaf):
            if not isinstance(leaf, PlanarBody | SpatialBody):
                # A body that reads other coordinates too (e.g. one moved by
                # joints from its parent): the part sees all of q.
                return part, tuple(range(n))
            bodies.setdefault((type(leaf), leaf.index), leaf)
    offsets, indices = {}, []
    for key, body in bodies.items():
        offsets[key] = len(indices)
        indices += range(body.index, body.index + body.size)
    template = jax.tree.map(
        lambda x: (
            dataclasses.replace(x, index=offsets[(type(x), x.index)])
            if _is_body(x)
            else x
        ),
        part,
        is_leaf=_is_body,
    )
    if hasattr(template, "name"):  # labels do not change the computation
        template = dataclasses.replace(template, name="")
    return template, tuple(indices)


def _key(template):
    leaves, treedef = jax.tree.flatten(template)
    plain = (bool, int, float, complex, str)
    return treedef, tuple(
        (type(x), x) if isinstance(x, plain) else ("id", id(x)) for x in leaves
    )


class Batched(eqx.Module):
    """Parts grouped by template; `rows` and `total` evaluate them."""

    templates: tuple
    indices: tuple[tuple[tuple[int, ...], ...], ...] = eqx.field(static=True)
    members: tuple[tuple[int, ...], ...] = eqx.field(static=True)

    @classmethod
    def of(cls, parts, n: int) -> "Batched":
        groups: dict = {}
        for position, part in enumerate(parts):
            template, indices = _localize(part, n)
            key = ("self", id(part)) if indices == tuple(range(n)) else _key(template)
            group = groups.setdefault(key, (template, [], []))
            group[1].append(indices)
            group[2].append(position)
        values = list(groups.values())
        return cls(
            tuple(v[0] for v in values),
            tuple(tuple(v[1]) for v in values),
            tuple(tuple(v[2]) for v in values),
        )

    def _evaluate(self, fn, arrays):
        for template, indices in zip(self.templates, self.indices, strict=True):
            local = [_gather(a, np.asarray(indices)) for a in arrays]
            if len(indices) == 1:
                yield fn(template, *[x[0] for x in local])[None]
            else:
                yield jax.vmap(lambda *xs, t_=template: fn(t_, *xs))(*local)

    def rows(self, fn, *arrays):
        """fn(part, *local arrays) -> (r,) for every part, concatenated in order."""
        outs = [jnp.atleast_2d(out) for out in self._evaluate(fn, arrays)]
        if not outs:
            return jnp.zeros((0,), arrays[0].dtype)
        blocks = {}
        start = 0
        for out, members in zip(outs, self.members, strict=True):
            r = out.shape[1]
            for j, position in enumerate(members):
                blocks[position] = np.arange(start + j * r, start + (j + 1) * r)
            start += out.size
        flat = jnp.concatenate([out.reshape(-1) for out in outs])
        order = np.concatenate([blocks[p] for p in sorted(blocks)])
        if np.array_equal(order, np.arange(order.size)):
            return flat
        return flat[order]

    def total(self, fn, *arrays):
        """The sum of the scalars fn(part, *local arrays) over every part."""
        return sum(jnp.sum(out) for out in self._evaluate(fn, arrays))

    def blocks(self, fn, *arrays):
        """(indices (k, L), fn(part, *local arrays) stacked over the k members,
        any pytree) for every group: what each part gives on the coordinates it
        reads."""
        out = []
        for template, indices in zip(self.templates, self.indices, strict=True):
            local = [_gather(a, np.asarray(indices)) for a in arrays]
            if len(indices) == 1:
                value = jax.tree.map(
                    lambda x: x[None], fn(template, *[x[0] for x in local])
                )
            else:
                value = jax.vmap(lambda *xs, t_=template: fn(t_, *xs))(*local)
            out.append((np.asarray(indices), value))
        return out


def _gather(a, idx: np.ndarray):
    """a[idx] for an (k, L) index array. Where the rows are one pattern shifted
    by a constant step (alike links of a chain), by reshapes of slices, whose
    derivatives are reshapes too, where a gather would cost a gather (and its
    transpose a scatter) per tangent."""
    k = idx.shape[0]
    steps = idx[1:] - idx[:-1] if k > 1 else np.zeros_like(idx)
    if idx.size == 0 or np.any(steps != steps[:1]):
        return a[idx]
    step = int(steps[0, 0]) if k > 1 else max(idx.shape[1], 1)
    if np.any(steps[:1] != step) or step < 1:
        return a[idx]
    row = idx[0]
    # Runs of consecutive indices in the first row, cut to at most `step` long,
    # each read as the first columns of one reshaped slice.
    breaks = np.flatnonzero(np.diff(row) != 1) + 1
    runs = [
        run[i : i + step] for run in np.split(row, breaks)
        for i in range(0, len(run), step)
    ]  # fmt: skip
    columns = []
    for run in runs:
        start, length = int(run[0]), len(run)
        block = a[start : start + step * k]
        pad = step * k - block.shape[0]
        block = jnp.pad(block, (0, pad)) if pad > 0 else block
        columns.append(block.reshape(k, step)[:, :length])
    return jnp.concatenate(columns, axis=1)
