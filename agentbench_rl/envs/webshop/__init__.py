"""WebShop (Yao et al., 2022) in its text mode: ``agentbench/WebShop-v0``.

Rebuilt from the original's ``web_agent_site`` (pages, actions, goals, reward), with the
original's pyserini ranking (Lucene 8 BM25) recomputed in Python, so no Java is needed.
Importing this package is cheap: the search index, spaCy and rapidfuzz load when an env is made.
The env card is ``envs/webshop/README.md``.
"""
