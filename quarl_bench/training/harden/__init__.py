"""Hardening: fine-tune a trained agent so that it survives a narrow quantization spec (``quarl-bench harden``)."""
