"""Training rewards: the registry, their scorers, rollout batches, reading a rollout, truth,
similarity, consistency.
"""
