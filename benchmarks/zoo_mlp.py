"""The zoo's MLP agents the C benchmarks walk, and one agent's C artifact built as ``export`` builds it
(calibrated on 1000 fp32-visited states). Imported by the ``c_int8_*`` benchmarks, which run from this folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ALGOS = ("a2c", "ppo", "dqn", "qrdqn", "ddpg", "sac", "tqc")
ENVS = (
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Pendulum-v1",
    "LunarLander-v2",
    "LunarLanderContinuous-v2",
    "BipedalWalker-v3",
)


def zoo_agents(zoo: Path, algos=ALGOS, envs=ENVS) -> list[tuple[str, str]]:
    """(algo, env) of every agent the zoo folder holds (a folder with configs only holds none)."""
    return [(a, e) for a in algos for e in envs if (zoo / a / f"{e}_1" / f"{e}.zip").is_file()]


def c_agent(zoo: Path, algo: str, env_id: str, weight_bits: int = 8) -> tuple[Any, Any, Any]:
    """The loaded agent, its deployable module and its C artifact (``c-int8``, or ``c-int4`` with 4).

    :raises QuarlError: for a policy the C backends do not write.
    """
    from quarl_bench import AgentQuery, resolve
    from quarl_bench.deploy.backends import c_artifact
    from quarl_bench.deploy.export import deployable, split_normalizer
    from quarl_bench.evaluation.calibration import visited_states
    from quarl_bench.zoo.forms import load_agent

    agent = load_agent(resolve(AgentQuery(env=env_id, algo=algo, folder=str(zoo), use_hub=False)))
    policy = agent.model.policy
    policy.set_training_mode(False)
    env = agent.make_env(1, 0)
    raw_env, normalizer = split_normalizer(env)
    env.close()
    module = deployable(policy, raw_env.observation_space, normalizer)
    return agent, module, c_artifact(module, visited_states(policy, agent.make_env, 1000), weight_bits)
