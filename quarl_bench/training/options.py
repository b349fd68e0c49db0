"""The options of PPO/A2C on quantized rollouts, importable without torch (the command line lists them)."""

ROLLOUT_CORRECTIONS = ("none", "tis", "mis")  # naive, truncated / masked importance sampling (quantized_rollouts.py)
ROLLOUT_BACKENDS = ("torch", "onnxruntime")  # how the behaviour policy acts (behaviour.py)
