"""Run rl-zoo3's own ``enjoy`` on a 2021 zoo agent (its pickles name the old ``gym`` package): a cross-check of
quarl-bench's evaluation against rl-zoo3's, on the same installed stack.

    .venv/bin/python scripts/rl_zoo3_enjoy.py --algo ppo --env BipedalWalker-v3 -f ../shared/zoo --no-render \\
        -n 32000 --exp-id 1 --seed 0

Arguments are rl-zoo3 ``enjoy``'s; it prints "Episode Reward: ..." per finished episode.
"""

from rl_zoo3.enjoy import enjoy

from quarl_bench.zoo.envs import gym_pickle_alias

if __name__ == "__main__":
    with gym_pickle_alias():
        enjoy()
