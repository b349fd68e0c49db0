"""Evaluation: seeded episodes over vectorized envs, worker processes, the greedy fast path, decision margins and
closed-loop fidelity."""
