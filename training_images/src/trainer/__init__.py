"""Byte-level GPT trainer of the gpu-platform: `python -m trainer prepare|train|export`."""
