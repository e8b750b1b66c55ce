"""Our envs for frameworks that speak OpenEnv's protocol (``server``: ``agentbench-rl
serve-env``) and for TRL's ``GRPOTrainer`` (``trl``). Needs the ``openenv`` extra."""
