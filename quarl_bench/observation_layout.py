"""A Dict observation as one flat vector: its keys concatenated in a declared order, the order SB3's
``CombinedExtractor`` concatenates them in (the Dict space's own key order).

Every stage that keeps states as arrays (calibration, the fixed-state set, the parity gate, an artifact's input)
keeps a Dict policy's states flat in this order; :func:`as_observations` turns them back into the Dict the policy
acts on. An artifact's ``policy.json`` records the layout, so a client concatenates the keys the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from quarl_bench.errors import QuarlError


@dataclass(frozen=True)
class ObservationLayout:
    """The keys of a Dict observation, in order, each with its shape; a key's values are flattened row-major."""

    keys: tuple[tuple[str, tuple[int, ...]], ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(int(np.prod(shape)) for _, shape in self.keys)

    @property
    def size(self) -> int:
        return sum(self.sizes)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.keys)

    def slices(self) -> dict[str, slice]:
        """Each key's columns in the flat vector."""
        found, offset = {}, 0
        for (name, _), size in zip(self.keys, self.sizes, strict=True):
            found[name] = slice(offset, offset + size)
            offset += size
        return found

    def flatten(self, observation: dict[str, Any]) -> np.ndarray:
        """A batch of Dict observations (each key ``(n, *shape)``) as ``(n, size)`` float32 rows."""
        first = np.asarray(observation[self.names[0]])
        rows = len(first) if first.ndim > len(self.keys[0][1]) else 1
        return np.concatenate(
            [np.asarray(observation[name], np.float32).reshape(rows, -1) for name in self.names], axis=1
        )

    def unflatten(self, states: Any) -> dict[str, Any]:
        """Flat rows (numpy or torch) back into the Dict, each key ``(n, *shape)``."""
        shapes = dict(self.keys)
        return {name: states[:, columns].reshape(-1, *shapes[name]) for name, columns in self.slices().items()}

    def features(self) -> list[str]:
        """A name per flat column: ``key[i]``."""
        return [f"{name}[{i}]" for name, size in zip(self.names, self.sizes, strict=True) for i in range(size)]

    def as_json(self) -> list[dict[str, Any]]:
        """What ``policy.json`` records: each key's name, shape and columns."""
        return [
            {"name": name, "shape": list(shape), "offset": columns.start, "size": columns.stop - columns.start}
            for (name, shape), columns in zip(self.keys, self.slices().values(), strict=True)
        ]

    def flat_statistics(self, normalizer: Any) -> tuple[np.ndarray, np.ndarray]:
        """VecNormalize's per-key statistics as flat ``(mean, 1 / sqrt(var + eps))`` vectors.

        :raises QuarlError: where it normalises some keys and not others (one clip bound cannot hold for both).
        """
        normalized = list(normalizer.norm_obs_keys or self.names)
        left = [name for name in self.names if name not in normalized]
        if left:
            raise QuarlError(
                f"cannot export: VecNormalize normalises {', '.join(normalized)} but not {', '.join(left)}; "
                "expected every key of the Dict observation normalised, or none"
            )
        statistics = normalizer.obs_rms
        mean = np.concatenate([np.asarray(statistics[name].mean, np.float64).reshape(-1) for name in self.names])
        var = np.concatenate([np.asarray(statistics[name].var, np.float64).reshape(-1) for name in self.names])
        return mean.astype(np.float32), (1.0 / np.sqrt(var + normalizer.epsilon)).astype(np.float32)


def layout_of(space: spaces.Space | None) -> ObservationLayout | None:
    """The layout of a Dict observation space (None for any other space).

    :raises QuarlError: for a Dict whose values are not vector Boxes (nested Dicts, images, discrete keys).
    """
    if not isinstance(space, spaces.Dict):
        return None
    keys = []
    for name, subspace in space.spaces.items():
        if not isinstance(subspace, spaces.Box) or len(subspace.shape) > 1:
            raise QuarlError(
                f"Dict observation key {name!r} is a {type(subspace).__name__} of shape "
                f"{getattr(subspace, 'shape', None)}: expected every key a vector Box"
            )
        keys.append((str(name), tuple(int(n) for n in subspace.shape)))
    return ObservationLayout(tuple(keys))


def as_observations(space: spaces.Space | None, states: Any) -> Any:
    """States as the policy takes them: flat rows of a Dict policy unflattened; anything else as it is."""
    layout = layout_of(space)
    if layout is None or isinstance(states, dict):
        return states
    return layout.unflatten(states)


def as_flat(space: spaces.Space | None, observation: Any) -> np.ndarray:
    """A batch of observations as array rows: a Dict policy's flattened in its layout's order."""
    layout = layout_of(space)
    if layout is None or not isinstance(observation, dict):
        return np.asarray(observation)
    return layout.flatten(observation)


def applied_flat(space: spaces.Space | None, states: np.ndarray, function: Any) -> np.ndarray:
    """``function`` (one that takes and gives the observations as the env makes them, such as VecNormalize's
    ``unnormalize_obs``) applied to array rows: a Dict policy's unflattened for it and flattened after."""
    return as_flat(space, function(as_observations(space, states)))
