"""TRL: the GRPO tool environment and reward functions."""
