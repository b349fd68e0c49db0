"""A success rule for BipedalWalker (and its Hardcore course): the walker did not fall.

Box2D's walker ends an episode with a reward of -100 when its hull touches the ground (or it walks off the start);
an episode that reached the end of the course or ran to the time limit without that step stood.
    quarl-bench certify --algo ppo --env BipedalWalker-v3 --outcome success \
        --success examples/judges/walker_stood.py:stood --tolerance-abs 0.1
"""

from __future__ import annotations

from quarl_bench.evaluation.judges import Episode

FALL_REWARD = -100.0  # gymnasium's bipedal_walker.py: ``reward = -100`` on game over


def stood(episode: Episode) -> bool:
    """True unless the episode's last step carries the fall's -100."""
    assert episode.trajectory is not None
    return not (episode.terminated and episode.trajectory.rewards[-1] <= FALL_REWARD)
