"""Training data: SFT export, cold-start synthesis, difficulty filtering, sampling, multiple-choice
questions.
"""
