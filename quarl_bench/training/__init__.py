"""What touches a learner: mixed-precision training hooks."""
