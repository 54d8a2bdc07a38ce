"""Running an evaluation: configuration, the resumable runner, its store, backends (local, job arrays,
Ray) and merge.
"""
