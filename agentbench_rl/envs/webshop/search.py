"""The original WebShop search: Lucene 8 BM25 as pyserini 0.17.0 ranks, on sparse matrices.

Documents are the original's (``search_engine/convert_product_file_format.py``): title,
description, first bullet point and the options text, lower-cased. The original indexes them with
pyserini 0.17.0 (Anserini 0.14.3, Lucene 8.11) and searches with ``LuceneSearcher.search(query,
k=50)``. We reproduce that ranking exactly (``tests/envs/test_webshop_search.py`` compares the
top 50 of all 6,910 goal instructions with a fixture recorded from the real pyserini by
``envs/webshop/pyserini_rankings.py``):

- analysis as Anserini's default English analyzer: Lucene's ``StandardTokenizer`` (Unicode word
  breaks, emoji kept as tokens, a run of ``_`` alone dropped), the English possessive filter,
  lower-casing, Lucene's 33 English stop words, and Porter stemming, for which nltk's
  ``PorterStemmer`` in ``MARTIN_EXTENSIONS`` mode gives Lucene's ``PorterStemmer`` ("us" stays);
- Lucene 8's BM25 (k1 = 0.9, b = 0.4) in float32 as ``BM25Similarity`` computes it: document
  lengths stored in one byte (``SmallFloat.intToByte4``, lossy above 23 terms),
  ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` and a term scoring
  ``w - w / (1 + tf * (1 / (k1 * (1 - b + b * dl / avgdl))))`` with ``w = count * idf``: a query
  word repeated is one clause boosted by its count (Anserini's bag-of-words query); clause scores
  are summed in double and rounded to float32, as Lucene's disjunction scorers do;
- the top 50 by score, ties broken by asin (Anserini sorts on the ``id`` field after the score).

We write our own scorer (postings as a sparse matrix in CSR layout, numpy vector operations)
instead of using ``bm25s``, because ``bm25s`` scores from exact document lengths in its own
precision, and Lucene's one-byte lengths and float32 rounding decide near-ties.

The index is built once per catalogue and cached on disk (``$XDG_CACHE_HOME/agentbench-rl`` or
``~/.cache/agentbench-rl``, shared by every process and checkout of the machine). Its key covers
everything that decides the index: the sha256 of the indexed documents and the code fingerprint
(:func:`code_fingerprint`: this module's source, which holds the analyzer, the scorer and the
stored format, and the versions of nltk's stemmer, ``regex`` and Python's Unicode data), so a
checkout or environment that analyses differently never reads another's index. It is written
atomically (a scratch folder renamed into place) so concurrent workers never read half an index,
and ``meta.json`` records the key and the sha256 of ``postings.npz``: an entry that does not match
(truncated, overwritten, from another version) is set aside and rebuilt, never read.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import tempfile
import unicodedata
import warnings
import zipfile
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from agentbench_rl.core.hashing import sha256_file
from agentbench_rl.envs.webshop.data import Product

#: How many results a search returns (the original's ``SEARCH_RETURN_N``).
SEARCH_RETURN_N = 50
#: Anserini's BM25 defaults (Java floats).
BM25_K1 = np.float32(0.9)
BM25_B = np.float32(0.4)
#: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (what Anserini's analyzer removes).
STOP_WORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
        "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
        "these", "they", "this", "to", "was", "will", "with",
    }
)  # fmt: skip
CACHE_ENV_VAR = "XDG_CACHE_HOME"
#: Lucene's ``StandardTokenizer`` cuts longer tokens into pieces of this length.
MAX_TOKEN_LENGTH = 255

# Symbols that Lucene 8.11's StandardTokenizer emits as tokens although they are not word
# characters: Emoji 11's Extended_Pictographic (which, unlike the Emoji property, has "★", "♡",
# "☞"), plus a few CJK radicals and Katakana/SE-Asian signs. Found by running the real tokenizer
# on every code point (``python envs/webshop/pyserini_rankings.py symbols``); Python's Unicode
# data cannot give it (``regex``'s Extended_Pictographic is the Emoji property).
_SYMBOLS = (
    "\u00a9\u00ae\u05f3\u066b\u109e-\u109f\u19da\u19de-\u19df\u1aa0-\u1aa6\u1aa8-\u1aad"
    "\u203c\u2049\u2122\u2194-\u2199\u21a9-\u21aa\u231a-\u231b\u2328\u2388\u23cf"
    "\u23e9-\u23f3\u23f8-\u23fa\u25aa-\u25ab\u25b6\u25c0\u25fb-\u25fe\u2600-\u2605"
    "\u2607-\u2612\u2614-\u2685\u2690-\u2705\u2708-\u2712\u2714\u2716\u271d\u2721\u2728"
    "\u2733-\u2734\u2744\u2747\u274c\u274e\u2753-\u2755\u2757\u2763-\u2767\u2795-\u2797"
    "\u27a1\u27b0\u27bf\u2934-\u2935\u2b05-\u2b07\u2b1b-\u2b1c\u2b50\u2b55\u2e80-\u2e99"
    "\u2e9b-\u2ef3\u2f00-\u2fd5\u3030\u303d\u309b-\u309c\u30a0\u3297\u3299\u32d0-\u32fe"
    "\u3300-\u3357\uaa77-\uaa79\uaade-\uaadf\U0001173a-\U0001173b\U0001173f"
    "\U0001f000-\U0001f0ff\U0001f10d-\U0001f10f\U0001f12f\U0001f16c-\U0001f16f\U0001f18e"
    "\U0001f191-\U0001f19a\U0001f1ad-\U0001f1e5\U0001f200-\U0001f20f\U0001f21a\U0001f22f"
    "\U0001f232-\U0001f23a\U0001f23c-\U0001f23f\U0001f249-\U0001f53d\U0001f546-\U0001f64f"
    "\U0001f680-\U0001f6ff\U0001f774-\U0001f77f\U0001f7d5-\U0001f7ff\U0001f80c-\U0001f80f"
    "\U0001f848-\U0001f84f\U0001f85a-\U0001f85f\U0001f888-\U0001f88f\U0001f8ae-\U0001f8ff"
    "\U0001f90c-\U0001f93a\U0001f93c-\U0001f945\U0001f947-\U0001fbef\U0001fbfa-\U0001fffd"
)
# Unicode word breaks (UAX #29) as Lucene's StandardTokenizer applies them: a Han or Hiragana
# character is a token alone; an emoji with its variation selector, skin tone and ZWJ-joined
# emoji; keycaps and flag pairs; else a run of word characters (letters, marks, digits, '_')
# with format characters (soft hyphen) inside, joined across ':', '.', "'", '·' and curly quotes
# between two letters and across ',', ';', '.', "'" or a fraction slash between two digits.
_EMOJI = f"[{_SYMBOLS}](?:[\ufe0f\U0001f3fb-\U0001f3ff]|\u200d[{_SYMBOLS}])*"
_WORD_CHAR = r"[\w--[\p{Han}\p{Hiragana}]]"
_FIRST_CHAR = r"[\w--[\p{Han}\p{Hiragana}\p{Grapheme_Extend}]]"  # a mark alone is no token
_LETTER = r"[\p{L}--[\p{Han}\p{Hiragana}\p{Katakana}]]"  # UAX #29's ALetter, roughly


@cache
def _patterns() -> tuple[Any, Any]:
    """The token pattern and the connector-only pattern (``regex``, imported when first used)."""
    import regex  # Unicode properties and set operations, which ``re`` lacks

    token = regex.compile(
        rf"[\p{{Han}}\p{{Hiragana}}]\p{{Cf}}*"
        rf"|{_EMOJI}"
        r"|[0-9#*]\uFE0F?\u20E3|[\U0001F1E6-\U0001F1FF]{2}"
        rf"|{_FIRST_CHAR}(?:{_WORD_CHAR}|\p{{Cf}}"
        rf"|(?<={_LETTER}\p{{M}}*)[:.'\u00B7\u0387\u05F4\u2018\u2019\u2024\u2027\uFE13\uFE52\uFE55"
        rf"\uFF07\uFF0E\uFF1A](?={_LETTER})"
        r"|(?<=\p{Nd}\p{M}*)[,;.'\u037E\u0589\u060C\u060D\u066C\u07F8\u2018\u2019\u2024\u2044"
        r"\uFE10\uFE14\uFE50\uFE52\uFE54\uFF07\uFF0C\uFF0E\uFF1B](?=\p{Nd}))*",
        regex.VERSION1,
    )
    connectors_only = regex.compile(r"[\p{Pc}\p{Cf}]+", regex.VERSION1)
    return token, connectors_only


# The same rules on ASCII text, where they need no Unicode properties: Python's ``re`` runs it
# about six times as fast as ``_patterns()`` (index builds are mostly tokenizing).
_ASCII_TOKEN = re.compile(
    r"\w+(?:(?:(?<=[A-Za-z])[:.'](?=[A-Za-z])|(?<=[0-9])[,;.'](?=[0-9]))\w+)*", re.ASCII
)
_POSSESSIVE = ("'s", "\u2019s", "\uff07s")


def product_document(product: Product) -> str:
    """The text the original indexes for a product (``convert_product_file_format.py``).

    Example:
        >>> from agentbench_rl.envs.webshop.data import clean_product
        >>> raw = {"asin": "B0X", "name": "Tee", "full_description": "Soft.",
        ...        "small_description": ["Cotton", "Blue"],
        ...        "customization_options": {"Size": [{"value": "S"}, {"value": "M"}]}}
        >>> product_document(clean_product(raw, {}, None))
        'tee soft. cotton size: s, m'
    """
    option_text = ", and ".join(
        f"{name}: {', '.join(values)}" for name, values in product.options.items()
    )
    first_bullet = product.bullet_points[0] if product.bullet_points else ""
    return " ".join([product.name, product.description, first_bullet, option_text]).lower()


def lucene_tokens(text: str) -> list[str]:
    """Tokens of ``text`` as Lucene 8's ``StandardTokenizer`` cuts them (see ``_patterns``).

    Example:
        >>> lucene_tokens("L'eau 6.7 fl. oz, 1,000 x-large __init__ _ ❤️ 锅巴")
        ["L'eau", '6.7', 'fl', 'oz', '1,000', 'x', 'large', '__init__', '❤️', '锅', '巴']
    """
    pattern, connectors_only = _patterns()
    found = _ASCII_TOKEN.findall(text) if text.isascii() else pattern.findall(text)
    tokens: list[str] = []
    for token in found:
        if connectors_only.fullmatch(token):
            continue  # '_' alone is no word for Lucene
        if len(token) > MAX_TOKEN_LENGTH:
            tokens.extend(
                token[start : start + MAX_TOKEN_LENGTH]
                for start in range(0, len(token), MAX_TOKEN_LENGTH)
            )
        else:
            tokens.append(token)
    return tokens


class Analyzer:
    """Text to index terms as Anserini's English analyzer: tokens, possessives, stop words, Porter.

    Example:
        >>> Analyzer().terms("The Women's Running-Shoes for us, size 6.5")
        ['women', 'run', 'shoe', 'us', 'size', '6.5']
    """

    def __init__(self) -> None:
        from nltk.stem.porter import PorterStemmer

        # MARTIN_EXTENSIONS is Porter's algorithm as its author's reference code and Lucene's
        # PorterStemmer have it (words of one or two letters are left alone).
        self._stem = PorterStemmer(mode=PorterStemmer.MARTIN_EXTENSIONS).stem
        self._cache: dict[str, str] = {}

    def terms(self, text: str) -> list[str]:
        """The index terms of ``text``, in order, repeats kept (they weigh a query term)."""
        out = []
        cache = self._cache
        for token in lucene_tokens(text.lower()):
            if token.endswith(_POSSESSIVE):
                token = token[:-2]
            if token in STOP_WORDS:
                continue
            term = cache.get(token)
            if term is None:
                term = cache[token] = self._stem(token, to_lowercase=False)
            out.append(term)
        return out


# SmallFloat: 255 minus the int4 code of Integer.MAX_VALUE (231) values are stored as they are.
_FREE_VALUES = 24


def int_to_byte4(length: int) -> int:
    """Lucene's ``SmallFloat.intToByte4``: a document length in one byte (exact below 24).

    Lengths from 24 on keep their 4 most significant bits above 24 (rounded down).

    Example:
        >>> [int_to_byte4(n) for n in (0, 23, 24, 40, 41)]
        [0, 23, 24, 40, 40]
    """
    if length < _FREE_VALUES:
        return length
    rest = length - _FREE_VALUES
    bits = rest.bit_length()
    if bits < 4:
        return _FREE_VALUES + rest
    shift = bits - 4
    return _FREE_VALUES + (((rest >> shift) & 0x07) | ((shift + 1) << 3))


def byte4_to_int(code: int) -> int:
    """Lucene's ``SmallFloat.byte4ToInt``: the length a norm byte stands for.

    Example:
        >>> [byte4_to_int(int_to_byte4(n)) for n in (23, 24, 41, 100, 1000)]
        [23, 24, 40, 96, 984]
    """
    if code < _FREE_VALUES:
        return code
    rest = code - _FREE_VALUES
    shift = (rest >> 3) - 1
    return _FREE_VALUES + (rest & 0x07 if shift == -1 else ((rest & 0x07) | 0x08) << shift)


def lucene_idf(doc_freq: int, doc_count: int) -> np.float32:
    """BM25 idf as Lucene 8 computes it: in double, then rounded to float32.

    Example:
        >>> float(lucene_idf(2, 4)) == float(np.float32(math.log(2)))
        True
    """
    return np.float32(math.log(1 + (doc_count - doc_freq + 0.5) / (doc_freq + 0.5)))


def norm_inverses(sum_length: int, doc_count: int) -> np.ndarray:
    """Lucene 8's BM25 cache: ``1 / (k1 * (1 - b + b * length(norm) / avgdl))`` per norm byte.

    Every step in float32, as Java computes it; ``avgdl`` is ``sum_length / doc_count`` in double,
    then float32.
    """
    if sum_length == 0:  # no document has a term: nothing will be scored
        return np.ones(256, dtype=np.float32)
    avgdl = np.float32(sum_length / doc_count)
    lengths = np.array([byte4_to_int(code) for code in range(256)], dtype=np.float32)
    one = np.float32(1)
    return one / (BM25_K1 * ((one - BM25_B) + BM25_B * lengths / avgdl))


def _empty_index_arrays() -> dict[str, np.ndarray]:
    return {
        "indptr": np.zeros(1, dtype=np.int64),
        "docs": np.zeros(0, dtype=np.int32),
        "freqs": np.zeros(0, dtype=np.int32),
        "norms": np.zeros(0, dtype=np.uint8),
    }


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/agentbench-rl``, else ``~/.cache/agentbench-rl``.

    Example:
        >>> default_cache_dir().name
        'agentbench-rl'
    """
    root = os.environ.get(CACHE_ENV_VAR) or Path("~/.cache").expanduser()
    return Path(root) / "agentbench-rl"


def documents_digest(documents: Iterable[tuple[str, str]]) -> str:
    """sha256 of the (asin, text) pairs indexed: the key of the cached index.

    Example:
        >>> documents_digest([("B0X", "tee")]) == documents_digest([("B0X", "tee")])
        True
    """
    digest = hashlib.sha256()
    for asin, text in documents:
        digest.update(json.dumps([asin, text], ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def _version_of(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "absent"


@cache
def code_fingerprint() -> str:
    """sha256 of what, besides the documents, decides the index: this module's source (the
    analyzer, the scorer, the stored format) and the versions of the libraries the analyzer
    runs (nltk's Porter stemmer, ``regex``, Python's Unicode data).

    A hand-bumped version number would be forgotten: an edit of the tokenizer once changed the
    index without one, and two checkouts sharing the cache folder would then read each other's.

    Example:
        >>> len(code_fingerprint())
        64
    """
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for part in (
        f"nltk={_version_of('nltk')}",
        f"regex={_version_of('regex')}",
        f"unicode={unicodedata.unidata_version}",
    ):
        digest.update(b"\0" + part.encode("utf-8"))
    return digest.hexdigest()


def index_key(documents: Sequence[tuple[str, str]]) -> str:
    """Short key of an index: the documents' sha256 and the code fingerprint.

    Example:
        >>> index_key([("B0X", "tee")]).endswith(f"-c{code_fingerprint()[:16]}")
        True
    """
    return f"{documents_digest(documents)[:32]}-c{code_fingerprint()[:16]}"


def set_aside(folder: Path) -> None:
    """Remove ``folder`` without a reader ever seeing it half deleted: rename it to a scratch
    name first (atomic), then delete that. Another process that got there first wins.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> (root / "entry").mkdir()
        >>> set_aside(root / "entry"); set_aside(root / "entry"); list(root.iterdir())
        []
    """
    scratch = folder.with_name(f".{folder.name}.{os.getpid()}.{os.urandom(4).hex()}.stale")
    try:
        os.rename(folder, scratch)
    except OSError:
        return  # gone already (another process set it aside)
    shutil.rmtree(scratch, ignore_errors=True)


def atomic_write_dir(final: Path, write: Any) -> None:
    """Call ``write(folder)`` on a fresh temporary folder, then rename it to ``final``.

    A concurrent writer that gets there first wins; ours is then discarded, so a reader never
    sees a half-written folder.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        write(scratch)
        try:
            os.rename(scratch, final)
        except OSError:
            if not final.is_dir():
                raise
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)


class SearchIndex:
    """Lucene 8 BM25 over product documents; ``search(query)`` gives the asins of the top 50.

    Postings are a term-major sparse matrix (``indptr``/``docs``/``freqs``, scipy's CSR layout);
    the term-frequency part of every posting, ``tf * norm_inverse(doc)``, is precomputed in
    float32, so a search is a few vector operations over the query terms' postings.

    Example:
        >>> index = SearchIndex.build([("B01", "red cotton tee"), ("B02", "blue denim jeans"),
        ...                            ("B03", "red wine glass")])
        >>> index.search("red tee")
        ['B01', 'B03']
        >>> index.search("the of and")
        []
    """

    def __init__(
        self, asins: Sequence[str], terms: Sequence[str], arrays: dict[str, np.ndarray], key: str
    ) -> None:
        self.asins = list(asins)
        self.terms = list(terms)
        self._arrays = arrays
        self._analyzer = Analyzer()
        #: Identifies the indexed documents and the analyzer (the cache key).
        self.key = key
        self._vocabulary = {term: index for index, term in enumerate(self.terms)}
        indptr, docs, freqs, norms = (arrays[name] for name in ("indptr", "docs", "freqs", "norms"))
        # Lucene's collection statistics: documents with a term, and their summed lengths.
        lengths = np.zeros(len(self.asins), dtype=np.int64)
        np.add.at(lengths, docs, freqs)
        doc_count = int(np.count_nonzero(lengths))
        inverses = norm_inverses(int(lengths.sum()), max(doc_count, 1))
        self._indptr = indptr
        self._docs = docs
        self._tf_norm = freqs.astype(np.float32) * inverses[norms[docs]]
        self._doc_freqs = np.diff(indptr)
        self._idf = np.array(
            [lucene_idf(int(n), doc_count) for n in self._doc_freqs], dtype=np.float32
        )
        # Anserini breaks score ties by the id field (the asin), in string order.
        order = np.argsort(np.array(self.asins, dtype=object), kind="stable")
        self._asin_rank = np.empty(len(self.asins), dtype=np.int64)
        self._asin_rank[order] = np.arange(len(self.asins))

    @classmethod
    def build(cls, documents: Sequence[tuple[str, str]], key: str | None = None) -> SearchIndex:
        """Index ``(asin, text)`` pairs in memory (``key``: their :func:`index_key`, if known)."""
        analyzer = Analyzer()
        vocabulary: dict[str, int] = {}
        term_ids: list[int] = []  # every token's term id, document after document
        lengths = np.zeros(len(documents), dtype=np.int64)
        for doc, (_, text) in enumerate(documents):
            terms_of_doc = analyzer.terms(text)
            lengths[doc] = len(terms_of_doc)
            term_ids.extend(vocabulary.setdefault(term, len(vocabulary)) for term in terms_of_doc)
        # Postings, term-major with documents ascending: sort (term, doc) keys, count repeats.
        terms = sorted(vocabulary)
        rank = np.empty(len(vocabulary), dtype=np.int64)
        rank[[vocabulary[term] for term in terms]] = np.arange(len(terms))
        docs_of_tokens = np.repeat(np.arange(len(documents), dtype=np.int64), lengths)
        keys = rank[np.array(term_ids, dtype=np.int64)] * len(documents) + docs_of_tokens
        unique, freqs = np.unique(keys, return_counts=True)
        arrays = _empty_index_arrays()
        arrays["indptr"] = np.searchsorted(
            unique, np.arange(len(terms) + 1, dtype=np.int64) * len(documents)
        )
        arrays["docs"] = (unique % max(len(documents), 1)).astype(np.int32)
        arrays["freqs"] = freqs.astype(np.int32)
        arrays["norms"] = np.array([int_to_byte4(int(n)) for n in lengths], dtype=np.uint8)
        asins = [asin for asin, _ in documents]
        return cls(asins, terms, arrays, key or index_key(documents))

    @classmethod
    def load_or_build(
        cls, documents: Sequence[tuple[str, str]], cache_dir: Path | None = None
    ) -> SearchIndex:
        """The cached index of these documents, built and cached first if there is none."""
        key = index_key(documents)
        folder = (cache_dir or default_cache_dir()) / f"webshop-bm25-{key}-lucene8"
        if folder.exists():
            cached = cls._read_cache(folder, key, documents)
            if cached is not None:
                return cached
            set_aside(folder)  # damaged or not ours: rebuilt below
        index = cls.build(documents, key)

        def write(scratch: Path) -> None:
            arrays = index._arrays
            np.savez(
                scratch / "postings.npz",
                indptr=arrays["indptr"],
                docs=arrays["docs"],
                freqs=arrays["freqs"],
                norms=arrays["norms"],
            )
            meta = {
                "key": key,
                "postings_sha256": sha256_file(scratch / "postings.npz"),
                "asins": index.asins,
                "terms": index.terms,
            }
            (scratch / "meta.json").write_text(json.dumps(meta, ensure_ascii=False), "utf-8")

        try:
            atomic_write_dir(folder, write)
        except OSError as error:  # a read-only or full cache: keep the index in memory only
            warnings.warn(
                f"webshop: could not cache the search index in {folder}: {error}", stacklevel=2
            )
        return index

    @classmethod
    def _read_cache(
        cls, folder: Path, key: str, documents: Sequence[tuple[str, str]]
    ) -> SearchIndex | None:
        """The index stored in ``folder`` if it is whole and is the index of ``documents`` under
        ``key`` (its key, the sha256 of its postings file, its asins and array shapes match);
        None otherwise."""
        try:
            meta = json.loads((folder / "meta.json").read_text("utf-8"))
            if (
                meta.get("key") != key
                or meta.get("postings_sha256") != sha256_file(folder / "postings.npz")
                or meta.get("asins") != [asin for asin, _ in documents]
            ):
                return None
            with np.load(folder / "postings.npz") as stored:
                arrays = {name: stored[name] for name in stored.files}
        except (OSError, ValueError, KeyError, EOFError, AttributeError, zipfile.BadZipFile):
            return None
        if (
            set(arrays) != set(_empty_index_arrays())
            or len(arrays["indptr"]) != len(meta["terms"]) + 1
            or len(arrays["norms"]) != len(documents)
            or len(arrays["docs"]) != len(arrays["freqs"])
        ):
            return None
        return cls(meta["asins"], meta["terms"], arrays, key)

    def scores(self, query: str) -> np.ndarray:
        """Every document's float32 BM25 score for ``query`` (0 where no query term occurs)."""
        counts = Counter(
            self._vocabulary[term]
            for term in self._analyzer.terms(query)
            if term in self._vocabulary
        )
        if not counts:
            return np.zeros(len(self.asins), dtype=np.float32)
        terms = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
        boosts = np.fromiter(counts.values(), dtype=np.float32, count=len(counts))
        starts, lengths = self._indptr[terms], self._doc_freqs[terms]
        # The postings of every query term, one after the other (term order, as summed below).
        offsets = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        postings = np.arange(int(lengths.sum())) + offsets
        # BoostQuery(TermQuery, count): weight = count * idf; Lucene 8's BM25Scorer.score
        # rewrites w * tf / (tf + norm) as w - w / (1 + tf * (1 / norm)) (monotone in float).
        weights = np.repeat(boosts * self._idf[terms], lengths)
        term_scores = weights - weights / (np.float32(1) + self._tf_norm[postings])
        # Clause scores summed in double, then float32, as Lucene's disjunction scorers do.
        total = np.bincount(self._docs[postings], weights=term_scores, minlength=len(self.asins))
        return total.astype(np.float32)

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """Asins of the ``k`` best documents for ``query`` (fewer if fewer match), best first."""
        scores = self.scores(query)
        matches = np.flatnonzero(scores > 0)
        if len(matches) > k:
            # Keep every document that scores at least the k-th best, then order those exactly.
            kth = np.partition(scores[matches], len(matches) - k)[len(matches) - k]
            matches = matches[scores[matches] >= kth]
        order = np.lexsort((self._asin_rank[matches], -scores[matches]))
        return [self.asins[i] for i in matches[order[:k]]]
