"""What work costs on this machine, for the plans of ``reproduce`` and ``record``: seconds per episode by env kind
and env, per training step by algorithm, and per agent; each figure names the run it was measured on."""

# seconds per evaluated episode in one worker (batched envs, zoo-sized policies, one torch thread), by env kind: the
# medians of the results of record's rows (2026-11-27, two workers on 2 cores): CartPole 0.0075, Acrobot 0.0044,
# MountainCar 0.002, LunarLander 0.042, BipedalWalker 0.116, HalfCheetahBullet 0.32, Walker2DBullet 0.35, Breakout
# 2.5, Pong 3.4; MuJoCo from `quarl-bench run -n 3` of sac HalfCheetah (0.1)
EPISODE_SECONDS = {
    "classic": 0.006,
    "box2d": 0.08,
    "pybullet": 0.34,
    "mujoco": 0.1,
    "atari": 3.0,
    "dmc": 0.3,
    "other": 0.5,
}
# seconds per episode measured where an env is far from its kind's figure: the Atari games of the results of record,
# and the certified record's Box2D rows (2026-11-29, two workers on 2 cores); BipedalWalker-v3's from its record of
# a2c and ppo on a quiet machine (2026-12-03: 5,460 episodes in 661 s on two workers, 0.232 s an episode in each, so
# 0.20 s on one at the record's 0.84 per worker); Breakout's from its certified record (2026-12-03, two workers: the
# median of 217 rows 3.32 s an episode in each, 2.8 s on one) and Pong's (2026-12-03 and 04, two workers: the median of
# 206 rows 4.95 s, 4.2 s on one; its episodes run ~8,900 steps to Breakout's ~5,600); LunarLander's from fresh
# records of its zoo agents (2026-12-04, two workers: 8,920 episodes in 423 s of rows, 0.047 s in each, 0.040 s on one;
# the continuous lander's 10,280 in 543 s, 0.053 s and 0.044 s), where the Box2D rows of 2026-11-29 had given the
# in-worker figures as if on one worker (the plan then said 6m09s for a 4m01s record); the MuJoCo four from a fresh,
# quiet record of their 16 zoo agents (2026-12-04, two workers: HalfCheetah 0.079 s an episode in each, Hopper 0.067,
# Swimmer 0.102, Walker2d 0.121), where the kind's 0.1 had come from three episodes of sac HalfCheetah; the PyBullet
# five from a fresh, quiet record of ppo's five agents (2026-12-04, two workers: Ant 0.625 s in each, HalfCheetah
# 0.500, Hopper 0.314, Reacher 0.029 for its 150-step episodes, Walker2D 0.384), where the kind's 0.34 had been the
# median of two envs' rows
ENV_EPISODE_SECONDS = {
    "BreakoutNoFrameskip-v4": 2.8,
    "PongNoFrameskip-v4": 4.2,
    "LunarLander-v3": 0.040,
    "LunarLanderContinuous-v3": 0.044,
    "BipedalWalker-v3": 0.20,
    "BipedalWalkerHardcore-v3": 0.41,
    "HalfCheetah-v4": 0.066,
    "Hopper-v4": 0.056,
    "Swimmer-v4": 0.086,
    "Walker2d-v4": 0.101,
    "AntBulletEnv-v0": 0.525,
    "HalfCheetahBulletEnv-v0": 0.42,
    "HopperBulletEnv-v0": 0.264,
    "ReacherBulletEnv-v0": 0.024,
    "Walker2DBulletEnv-v0": 0.322,
}
# seconds per environment step of rl-zoo3 training in one worker (one torch thread), by algorithm: the results of
# record's QAT sweep (two workers on 2 cores: ppo CartPole 22 s per 100k-step run, dqn CartPole 80 s per 50k,
# ddpg Pendulum 130 s per 20k); a2c, qrdqn and td3 by their likeness to those
TRAIN_STEP_SECONDS = {"ppo": 0.00022, "a2c": 0.0003, "dqn": 0.0016, "qrdqn": 0.002, "ddpg": 0.0066, "td3": 0.0066}
AGENT_OVERHEAD_SECONDS = 3.0  # loading an agent, its fixed fp32-visited states and margins, per agent
