"""Names of where agents come from, importable without torch: what a row's
algo says for a policy that is no SB3 agent, and the Control Suite's env prefix."""

# What a row's algo says for a policy that is no SB3 agent: a user's torch module or ONNX graph.
FOREIGN_ALGOS = ("torch-module", "onnx")
DMC_PREFIX = "dmc/"  # the Control Suite's tasks as flat-observation gymnasium envs (zoo/dmc.py)
