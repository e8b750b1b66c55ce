"""``bench learning``: PPO with every estimator on small MDPs whose objective is exact.

``family.py`` (the MDPs and their cards), ``mdp.py`` (the MDP type, exact J, hidden features),
``ppo.py`` (tabular PPO-clip), ``loop.py`` (one job: sample, estimate, update, evaluate),
``report.py`` (figures, tables, plot), ``bench.py`` (the command).
"""
