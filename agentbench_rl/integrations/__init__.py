"""Bridges to training engines other than the home trainer (``integrations/verl``: verl)."""
