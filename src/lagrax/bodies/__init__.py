"""Rigid bodies, joints and loads: build a System from physical parts.

from lagrax import bodies as lb

crank = lb.PlanarBody(0, mass="m1", inertia="I1")
system = lb.assemble([crank, ...], joints=[lb.Revolute(lb.GROUND, None,
                     crank, (-0.5, 0.0)), ...], gravity=(0.0, -9.81))
"""

from ._assemble import (
    assemble as assemble,
    constraint_labels as constraint_labels,
)
from ._body import (
    GROUND as GROUND,
    GROUND_3D as GROUND_3D,
    AbstractBody as AbstractBody,
    Ground as Ground,
    PlanarBody as PlanarBody,
    SpatialBody as SpatialBody,
    Value as Value,
    quaternion_rotation as quaternion_rotation,
    resolve as resolve,
    rotate_2d as rotate_2d,
    rotation_2d as rotation_2d,
)
from ._joint_space import JointSpace as JointSpace
from ._joints import (
    AbstractJoint as AbstractJoint,
    Driver as Driver,
    Fixed as Fixed,
    Hinge as Hinge,
    KnifeEdge as KnifeEdge,
    Prismatic as Prismatic,
    Revolute as Revolute,
    SpatialPrismatic as SpatialPrismatic,
    Spherical as Spherical,
    Weld as Weld,
)
from ._kinematic_tree import KinematicTree as KinematicTree
from ._loads import (
    AbstractForce as AbstractForce,
    AbstractLoad as AbstractLoad,
    Actuator as Actuator,
    BodyTorque as BodyTorque,
    Damper as Damper,
    PointForce as PointForce,
    Spring as Spring,
    body_torque as body_torque,
    point_force as point_force,
)
from ._mjcf import from_mjcf as from_mjcf
from ._multipliers import (
    JointForces as JointForces,
    joint_forces as joint_forces,
    multiplier_units as multiplier_units,
)
from ._tree_assemble import (
    TreeAssembly as TreeAssembly,
    TreeMap as TreeMap,
    assemble_tree as assemble_tree,
)
from ._tree_dynamics import (
    TreeLagrangian as TreeLagrangian,
    joint_reactions as joint_reactions,
)
from ._tree_mjcf import TreeJointSpace as TreeJointSpace
from ._urdf import from_urdf as from_urdf
