"""Built-in mechanical systems, each a [`lagrax.systems.Model`][]."""

from collections.abc import Callable

from .._model import Model as Model
from .andrews import andrews as andrews
from .bricard import bricard as bricard
from .car_axis import car_axis as car_axis
from .cart_pole import cart_pole as cart_pole
from .chain import chain as chain
from .double_pendulum import double_pendulum as double_pendulum
from .four_bar import four_bar as four_bar
from .n_four_bar import n_four_bar as n_four_bar
from .pendulum import pendulum as pendulum
from .sleigh import sleigh as sleigh
from .slider_crank import slider_crank as slider_crank
from .slider_pendulum import slider_pendulum as slider_pendulum
from .top import top as top


BUILTIN: dict[str, Callable[[], Model]] = {
    "pendulum": pendulum,
    "slider_pendulum": slider_pendulum,
    "double_pendulum": double_pendulum,
    "andrews": andrews,
    "car_axis": car_axis,
    "four_bar": four_bar,
    "n_four_bar": n_four_bar,
    "slider_crank": slider_crank,
    "cart_pole": cart_pole,
    "chain": chain,
    "top": top,
    "sleigh": sleigh,
    "bricard": bricard,
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
