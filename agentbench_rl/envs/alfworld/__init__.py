"""``agentbench/ALFWorld-v0``: ALFWorld text games, native engine (see envs/alfworld/README.md)."""
