"""WebShop search: the analyzer, Lucene 8 BM25 against an independent formula and against the
original pyserini's recorded rankings, tie-breaking, and the on-disk index cache."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench_rl.envs.webshop import search
from agentbench_rl.envs.webshop.data import clean_product, load_catalogue
from agentbench_rl.envs.webshop.env import search_query
from agentbench_rl.envs.webshop.goals import build_goals
from agentbench_rl.envs.webshop.search import (
    _ASCII_TOKEN,
    Analyzer,
    SearchIndex,
    _patterns,
    byte4_to_int,
    int_to_byte4,
    lucene_tokens,
    product_document,
)
from agentbench_rl.envs.webshop.world import PRICE_SEED, require_extras

FIXTURE = Path(__file__).resolve().parents[2] / "envs" / "webshop" / "pyserini_top50.json.gz"


@pytest.fixture(autouse=True, scope="module")
def _webshop_extra() -> None:
    """Skip without the ``webshop`` extra; on CI it must be installed, so fail there."""
    try:
        require_extras()
    except ModuleNotFoundError as missing:
        if os.environ.get("CI"):
            pytest.fail(str(missing))
        pytest.skip(str(missing))


def test_analyzer_is_anserini_english() -> None:
    terms = Analyzer().terms("The Women's L'eau-D'Issey 6.7 fl. oz Bottles, 1,000 x-large")
    # Stop words go ("the"), possessives lose "'s", apostrophes between letters and periods or
    # commas between digits stay inside a token, hyphens split, Porter stems ("bottles").
    assert terms == ["women", "l'eau", "d'issei", "6.7", "fl", "oz", "bottl", "1,000", "x", "larg"]


def test_product_document_is_the_original_contents() -> None:
    product = clean_product(
        {
            "asin": "B0X",
            "name": "Tee",
            "full_description": "Soft.",
            "small_description": ["First", "Second"],
            "customization_options": {
                "Color": [{"value": "Red"}, {"value": "Blue"}],
                "Size": [{"value": "S"}],
            },
        },
        {},
        None,
    )
    # Title, description, first bullet, "name: v1, v2, and name: v" -- lower-cased.
    assert product_document(product) == "tee soft. first color: red, blue, and size: s"


def test_porter_stems_as_lucene() -> None:
    # Lucene's PorterStemmer leaves words of one or two letters alone and keeps Porter's
    # original rules (PyStemmer's Snowball "porter" gave "u", "", "technologi", "assembli").
    assert Analyzer().terms("us s technology assembly running") == [
        "us", "s", "technolog", "assembl", "run"
    ]  # fmt: skip


def test_tokens_as_lucene_standard_tokenizer() -> None:
    # Checked by hand against Lucene 8.11's StandardTokenizer (pyserini's analyzer): emoji are
    # tokens (with their variation selector), '_' alone is not, a Han character is a token
    # alone, a colon joins letters but not a letter to a Han character, "✓" is no token.
    text = "❤️ ★ ✓ __init__ _ foo_ ps：新包 comfort：bring ﾟ 1⁄2"
    assert lucene_tokens(text) == [
        "❤️", "★", "__init__", "foo_", "ps", "新", "包", "comfort：bring", "1⁄2"
    ]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="aZ09_ :.,;'-x\t", max_size=30))
def test_ascii_fast_path_cuts_as_the_unicode_pattern(text: str) -> None:
    unicode_pattern, _ = _patterns()
    assert _ASCII_TOKEN.findall(text) == unicode_pattern.findall(text)


def test_small_float_lengths_by_hand() -> None:
    # SmallFloat.intToByte4: exact below 24; above, 24 + (n - 24) keeps its top 4 bits.
    # 41 - 24 = 17 = 0b10001 -> 0b10000 = 16 -> 40; 1000 - 24 = 976 = 0b1111010000 -> 0b1111000000
    # = 960 -> 984.
    for length, stored in [(0, 0), (1, 1), (23, 23), (24, 24), (40, 40), (41, 40), (1000, 984)]:
        assert byte4_to_int(int_to_byte4(length)) == stored
    assert all(0 <= int_to_byte4(n) <= 255 for n in (0, 10**6, 2**31 - 1))


def lucene_bm25_by_formula(documents: list[list[str]], query: list[str]) -> list[np.float32]:
    """An independent Lucene 8 BM25 (BM25Similarity with SmallFloat norms), written from the
    formula with explicit float32 steps; used to check the index's vectorised scores."""
    f32 = np.float32
    k1, b = f32(0.9), f32(0.4)
    lengths = [len(doc) for doc in documents]
    avgdl = f32(sum(lengths) / len(documents))
    scores = []
    for doc in documents:
        norm_length = f32(byte4_to_int(int_to_byte4(len(doc))))
        inverse = f32(1) / (k1 * ((f32(1) - b) + b * norm_length / avgdl))
        total = 0.0
        for term in dict.fromkeys(query):
            df = sum(term in other for other in documents)
            freq = doc.count(term)
            if not freq:
                continue
            idf = f32(math.log(1 + (len(documents) - df + 0.5) / (df + 0.5)))
            weight = f32(query.count(term)) * idf
            total += float(weight - weight / (f32(1) + f32(freq) * inverse))
        scores.append(f32(total))
    return scores


def test_bm25_scores_equal_an_independent_lucene_formula() -> None:
    rng = np.random.default_rng(0)
    words = ["red", "tee", "mug", "blue", "cotton", "glass", "lamp", "desk"]
    # Lengths past 24 so that the lossy norms matter.
    documents = [list(rng.choice(words, size=int(rng.integers(1, 60)))) for _ in range(40)]
    index = SearchIndex.build([(f"B{i:03d}", " ".join(doc)) for i, doc in enumerate(documents)])
    for query in (["red"], ["red", "tee"], ["mug", "mug", "lamp"], ["glass", "desk", "blue"]):
        expected = lucene_bm25_by_formula(documents, query)
        assert index.scores(" ".join(query)).tolist() == [float(x) for x in expected]


def test_bm25_ranking_by_hand() -> None:
    documents = [("B03", "red mug"), ("B01", "red red tee"), ("B02", "blue tee"), ("B04", "mug")]
    index = SearchIndex.build(documents)
    # "red": df = 2 of N = 4, idf = ln(1 + (4 - 2 + 0.5) / (2 + 0.5)) = ln 2; avgdl = 8/4 = 2.
    # B01: tf 2, dl 3; B03: tf 1, dl 2. Lucene's BM25 term score: idf * tf / (tf + k1 * norm),
    # so B01 scores ln 2 * 2 / (2 + 0.9 * 1.2) = 0.45010.
    avgdl = 8 / 4

    def score(tf: int, dl: int) -> float:
        norm = 1 - 0.4 + 0.4 * dl / avgdl
        return math.log(2) * tf / (tf + 0.9 * norm)

    assert score(2, 3) > score(1, 2)  # so B01 ranks first
    assert index.search("red") == ["B01", "B03"]
    assert index.scores("red")[1] == pytest.approx(score(2, 3), rel=1e-6)  # float32
    # A repeated query term weighs double (Anserini boosts a term by its count).
    assert index.search("mug mug tee")[:2] == ["B04", "B03"]
    assert index.search("nothing matches") == [] and index.search("") == []


def test_ties_break_by_asin_like_anserini() -> None:
    # Anserini sorts on (score, id): the asin, not the document order.
    index = SearchIndex.build([("B09", "lamp"), ("B02", "lamp"), ("B05", "lamp")])
    assert index.search("lamp") == ["B02", "B05", "B09"]


def test_top_k_keeps_the_best_and_orders_ties() -> None:
    documents = [(f"B{index:03d}", "desk " * (1 + index % 3)) for index in range(120)]
    index = SearchIndex.build(documents)
    results = index.search("desk")
    assert len(results) == 50
    # Higher term frequency scores higher; within one tf, asin order.
    expected = sorted(documents, key=lambda doc: (-len(doc[1]), doc[0]))[:50]
    assert results == [asin for asin, _ in expected]


def test_rankings_equal_the_original_pyserini(shared_data_dir: Path) -> None:
    """The top 50 of all 6,910 goal instructions equal pyserini 0.17.0's (recorded by
    envs/webshop/pyserini_rankings.py from the real Lucene index)."""
    fixture = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    rng = random.Random(PRICE_SEED)
    catalogue = load_catalogue(shared_data_dir / "webshop", "1k", None, False, rng)
    goals = build_goals(catalogue, human=False, rng=rng)
    queries = [search_query(goal.instruction_text) for goal in goals]
    digests = [hashlib.sha256(query.encode("utf-8")).hexdigest()[:16] for query in queries]
    assert digests == fixture["query_sha256_16"]
    assert [product.asin for product in catalogue.products] == fixture["asins"]
    index = SearchIndex.build(
        [(product.asin, product_document(product)) for product in catalogue.products]
    )
    asins = fixture["asins"]
    differing = [
        number
        for number, (query, ranked) in enumerate(zip(queries, fixture["top50"], strict=True))
        if index.search(query) != [asins[i] for i in ranked]
    ]
    assert differing == [], f"{len(differing)} of {len(queries)} rankings differ"
    # Scores: pyserini reports them rounded to 1e-4, a tied one lowered by 1e-6 per tie.
    position = {asin: i for i, asin in enumerate(index.asins)}
    for query, ranked, theirs in zip(queries, fixture["top50"], fixture["scores"], strict=False):
        ours = index.scores(query)[[position[asins[i]] for i in ranked]]
        assert np.abs(ours - np.array(theirs)).max() <= 5e-5 + 50e-6


def test_index_is_cached_on_disk_and_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    documents = [("B01", "red mug"), ("B02", "blue tee")]
    built = SearchIndex.load_or_build(documents, tmp_path)
    folders = list(tmp_path.iterdir())
    assert len(folders) == 1 and folders[0].name.startswith("webshop-bm25-")

    def refuse(cls: type, docs: object, key: object = None) -> None:
        raise AssertionError("the cached index should have been loaded")

    monkeypatch.setattr(SearchIndex, "build", classmethod(refuse))
    loaded = SearchIndex.load_or_build(documents, tmp_path)
    assert loaded.search("red") == built.search("red") == ["B01"]
    assert loaded.key == built.key


def test_damaged_cache_is_rebuilt(tmp_path: Path) -> None:
    documents = [("B01", "red mug"), ("B02", "blue tee")]
    SearchIndex.load_or_build(documents, tmp_path)
    folder = next(tmp_path.iterdir())
    (folder / "postings.npz").write_bytes(b"garbage")
    assert SearchIndex.load_or_build(documents, tmp_path).search("tee") == ["B02"]


def test_cache_whose_postings_are_not_the_recorded_ones_is_rebuilt(tmp_path: Path) -> None:
    # A well-formed postings file of another index (same number of documents, same array
    # names): what an overwrite by another version or a torn copy looks like. It parses, so
    # only the sha256 recorded in meta.json can tell; read, it would rank "tee" first for B01.
    documents = [("B01", "red mug"), ("B02", "blue tee")]
    SearchIndex.load_or_build(documents, tmp_path)
    folder = next(tmp_path.iterdir())
    other = SearchIndex.build([("B01", "blue tee"), ("B02", "red mug")])
    np.savez(folder / "postings.npz", **other._arrays)
    assert SearchIndex.load_or_build(documents, tmp_path).search("tee") == ["B02"]
    # and the rebuilt entry is whole again: the next load reads it
    assert (folder / "meta.json").is_file()
    assert json.loads((folder / "meta.json").read_text("utf-8"))["postings_sha256"] == (
        hashlib.sha256((folder / "postings.npz").read_bytes()).hexdigest()
    )


def test_partial_cache_entry_is_rebuilt(tmp_path: Path) -> None:
    documents = [("B01", "red mug"), ("B02", "blue tee")]
    SearchIndex.load_or_build(documents, tmp_path)
    folder = next(tmp_path.iterdir())
    (folder / "postings.npz").unlink()  # meta.json without its postings
    assert SearchIndex.load_or_build(documents, tmp_path).search("mug") == ["B01"]
    assert [path.name for path in tmp_path.iterdir()] == [folder.name]  # nothing left behind


def test_cache_key_covers_the_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another checkout (or nltk/regex version) sharing the cache folder gets its own entry.
    documents = [("B01", "red mug")]
    SearchIndex.load_or_build(documents, tmp_path)
    monkeypatch.setattr(search, "code_fingerprint", lambda: "f" * 64)
    built: list[int] = []
    real_build = SearchIndex.build.__func__  # type: ignore[attr-defined]

    def counting_build(cls: type, docs: object, key: object = None) -> SearchIndex:
        built.append(1)
        return real_build(cls, docs, key)

    monkeypatch.setattr(SearchIndex, "build", classmethod(counting_build))
    assert SearchIndex.load_or_build(documents, tmp_path).key.endswith("-c" + "f" * 16)
    assert built == [1] and len(list(tmp_path.iterdir())) == 2


def _build_in_cache(cache_dir: str) -> list[str]:
    documents = [(f"B{i:03d}", f"item {i} {'red' if i % 3 else 'blue'} mug") for i in range(300)]
    return SearchIndex.load_or_build(documents, Path(cache_dir)).search("red mug")


def test_concurrent_builders_agree_and_leave_one_entry(tmp_path: Path) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("fork")) as pool:
        results = list(pool.map(_build_in_cache, [str(tmp_path)] * 8))
    assert all(result == results[0] for result in results)
    assert len(list(tmp_path.iterdir())) == 1  # one entry, no scratch folder left
    assert _build_in_cache(str(tmp_path)) == results[0]


def test_unwritable_cache_keeps_the_index_in_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be", "utf-8")
    with pytest.warns(UserWarning, match="could not cache the search index"):
        index = SearchIndex.load_or_build([("B01", "red mug")], blocker)
    assert index.search("mug") == ["B01"]
