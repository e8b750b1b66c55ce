"""Bridges to other frameworks: training engines other than the home trainer
(``integrations/verl``: verl), and OpenEnv's env protocol and TRL (``integrations/openenv``)."""
