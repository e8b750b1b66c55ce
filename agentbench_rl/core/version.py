"""The installed package's version, for the records that name the code (provenance, summaries,
fingerprints). It lives at the bottom so that any layer reads it without importing the package's
``__init__`` (the public API on top)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("agentbench-rl")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
