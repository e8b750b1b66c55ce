"""Rollouts: the episode driver (``episode.py``) every client plays through, groups of
trajectories on one task, batched lockstep rollouts, scripted (expert and random) episodes, and
the env pools they step."""
