"""`from_urdf`: a URDF robot read by MuJoCo's URDF compiler, then as MJCF."""

import os

from ._mjcf import _mujoco, from_mjcf


def from_urdf(path, *, name: str | None = None, coordinates: str = "joint"):
    """A URDF robot as a [`lagrax.systems.Model`][], read by MuJoCo's URDF
    compiler and then as [`lagrax.bodies.from_mjcf`][] reads MJCF.

    Links become spatial bodies with their `<inertial>` (mass, origin, inertia
    tensor); revolute, continuous and prismatic joints become hinges and
    sliders about their `axis` (limits kept as data); fixed joints weld a link
    to its parent (merged); `<dynamics damping>` is joint damping; gravity is
    -9.81 along z. Visual and collision geometry is dropped first (meshes need
    not be present): dynamics reads only the inertials, so a link that moves
    needs one.

    **Arguments:**

    - `path`: the `.urdf` file.
    - `name`: the model's name; default the robot's.
    - `coordinates`: `"joint"` (default: the joints' values, a tree model) or
        `"absolute"` (seven per link); see [`lagrax.bodies.from_mjcf`][].
    """
    import xml.etree.ElementTree as ET

    text = os.fspath(path)
    if not os.path.exists(text):
        raise FileNotFoundError(f"from_urdf: no such file: {text!r}.")
    try:
        root = ET.parse(text).getroot()
    except ET.ParseError as e:
        raise ValueError(f"from_urdf: {text!r} is not valid XML: {e}") from e
    if root.tag != "robot":
        raise ValueError(
            f"from_urdf: {text!r} is not a URDF file (its root is <{root.tag}>, "
            "not <robot>)."
        )
    for link in root.iter("link"):
        for tag in ("visual", "collision"):
            for element in link.findall(tag):
                link.remove(element)
    mujoco = _mujoco("from_urdf")
    compiled = ET.SubElement(root, "mujoco")
    # Keep every link a body (lagrax merges welded ones itself) and the
    # inertias exactly as written.
    ET.SubElement(
        compiled, "compiler", fusestatic="false", discardvisual="true",
        balanceinertia="false", inertiafromgeom="false",
    )  # fmt: skip
    try:
        m = mujoco.MjModel.from_xml_string(ET.tostring(root, encoding="unicode"))
    except ValueError as e:
        raise ValueError(f"from_urdf: MuJoCo could not read {text!r}: {e}") from e
    return from_mjcf(
        m, name=root.get("name") if name is None else name, coordinates=coordinates
    )
