"""Trainer: PPO-clip with step credit, presets, checkpoints, distributed training (torch lives here)."""
