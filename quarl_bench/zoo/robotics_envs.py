"""Imported for its effect (rl-zoo3's ``--gym-packages`` in a training process): gymnasium-robotics' envs
registered, with the joint-type fix of :mod:`quarl_bench.zoo.robotics`."""

from quarl_bench.zoo.robotics import register_robotics_envs

register_robotics_envs()
