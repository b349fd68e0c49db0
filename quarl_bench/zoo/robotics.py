"""gymnasium-robotics' MuJoCo tasks (FetchReach-v4, FetchPush-v4, ...) on the MuJoCo quarl-bench pins.

gymnasium-robotics 1.4.2 checks a joint's type with ``joint_type in (mujoco.mjtJoint.mjJNT_HINGE, ...)``: the
tuple's enum member is compared with the model's ``np.int32``, and mujoco 3.17's enums no longer equate to numpy
integers that way (``np.int32(2) == mjJNT_SLIDE`` holds, ``mjJNT_SLIDE == np.int32(2)`` does not), so every Fetch
env fails an assertion as it is made. Its joint helpers are given a ``mujoco`` whose joint types are plain ints.
"""

from __future__ import annotations

import sys
from functools import cache
from types import SimpleNamespace
from typing import Any

PACKAGE = "gymnasium_robotics"


class _IntJointTypes:
    """``mujoco`` as gymnasium-robotics' joint helpers read it, but for ``mjtJoint``: plain ints."""

    def __init__(self, mujoco: Any) -> None:
        self._mujoco = mujoco
        names = ("mjJNT_FREE", "mjJNT_BALL", "mjJNT_SLIDE", "mjJNT_HINGE")
        self.mjtJoint = SimpleNamespace(**{name: int(getattr(mujoco.mjtJoint, name)) for name in names})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mujoco, name)


def joint_types_compare(mujoco: Any) -> bool:
    """Whether this mujoco's joint-type enum equals the model's numpy integers from the enum's side."""
    import numpy as np

    return bool(mujoco.mjtJoint.mjJNT_SLIDE == np.int32(int(mujoco.mjtJoint.mjJNT_SLIDE)))


def fix_loaded_robotics() -> None:
    """Give gymnasium-robotics' joint helpers int joint types, if it is imported and this mujoco needs it."""
    utils: Any = sys.modules.get(f"{PACKAGE}.utils.mujoco_utils")
    if utils is None or isinstance(getattr(utils, "mujoco", None), _IntJointTypes):
        return
    if not joint_types_compare(utils.mujoco):
        utils.mujoco = _IntJointTypes(utils.mujoco)


@cache
def register_robotics_envs() -> bool:
    """Import gymnasium-robotics (its envs register on import) when it is installed; whether it is."""
    import contextlib
    import importlib.util
    import io

    if importlib.util.find_spec(PACKAGE) is None:
        return False
    import gymnasium as gym

    with contextlib.redirect_stderr(io.StringIO()):  # its import prints a notice about the Adroit envs' rewards
        gym.register_envs(__import__(PACKAGE))
    fix_loaded_robotics()
    return True


def is_robotics_mujoco(entry_point: str) -> bool:
    """Whether an env's entry point is one of gymnasium-robotics' MuJoCo tasks (not its mujoco-py ones)."""
    return entry_point.startswith(f"{PACKAGE}.") and "MujocoPy" not in entry_point
