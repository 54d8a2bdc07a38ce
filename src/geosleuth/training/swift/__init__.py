"""ms-swift: ORM rewards, the multi-turn scheduler and the GRPO dataset export."""
