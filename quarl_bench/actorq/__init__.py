"""ActorQ: an fp32 learner, a parameter quantizer and actors that collect experience with int8/fp16 policies."""

ACTORQ_ALGOS = ("dqn", "td3", "ddpg", "d4pg")  # ActorQ learners: DQN for discrete actions, the others continuous
