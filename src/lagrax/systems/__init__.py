"""Built-in mechanical systems, each a [`lagrax.systems.Model`][]."""

from collections.abc import Callable

from ._model import Model as Model
from .andrews import andrews as andrews
from .car_axis import car_axis as car_axis
from .double_pendulum import double_pendulum as double_pendulum
from .pendulum import pendulum as pendulum
from .slider_pendulum import slider_pendulum as slider_pendulum


BUILTIN: dict[str, Callable[[], Model]] = {
    "pendulum": pendulum,
    "slider_pendulum": slider_pendulum,
    "double_pendulum": double_pendulum,
    "andrews": andrews,
    "car_axis": car_axis,
}


def get(name: str) -> Model:
    """The built-in model called `name`; see `BUILTIN` for the names."""
    try:
        factory = BUILTIN[name]
    except KeyError:
        raise ValueError(
            f"unknown system {name!r}: built-in systems are {sorted(BUILTIN)}."
        ) from None
    return factory()
