"""Certification: its config, the driver that plans paired batches as ordinary jobs, and its result."""
