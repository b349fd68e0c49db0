"""RL algorithms SB3 does not ship, built from its pieces."""
