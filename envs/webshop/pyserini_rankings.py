"""Record the original WebShop search's top 50 for every goal instruction, with the real pyserini.

Usage: python envs/webshop/pyserini_rankings.py --pyserini-python /work/venv-pyserini/bin/python
       [--data-dir DIR] [--work-dir DIR] [--output envs/webshop/pyserini_top50.json.gz]

The original indexes its catalogue with pyserini (``search_engine/convert_product_file_format.py``
writes ``documents.jsonl``, ``run_indexing.sh`` runs ``pyserini.index.lucene``) and searches it
with ``LuceneSearcher.search(query, k=50)`` (Lucene 8 BM25, k1 = 0.9, b = 0.4). This script does
the same on the standard 1k catalogue and searches the 6,910 goal instructions as the env's
``search[<instruction>]`` sends them. It writes a gzip'd JSON fixture that
``tests/envs/test_webshop_search.py`` compares our search against (not run in CI: it needs Java and
pyserini 0.17.0, which pins old libraries, so it runs in its own virtual environment):

    apt-get install -y openjdk-17-jre-headless
    python -m venv /work/venv-pyserini
    # pyserini.search imports faiss, which pyserini does not require: hence faiss-cpu.
    /work/venv-pyserini/bin/pip install torch==2.13.0 pyserini==0.17.0 faiss-cpu

The fixture holds the catalogue's asins in document order, each query's sha256, the indices of
its top 50 in the asin list, and pyserini's scores of the first 100 queries' results (as
Anserini reports them: rounded to 1e-4, tied scores lowered by 1e-6 per tie). The searching half
(``search`` subcommand) runs inside the pyserini environment and imports nothing from this
package.

``symbols`` (run with the pyserini python) prints the code points that Lucene's
``StandardTokenizer`` keeps as tokens although Python's ``\\w`` does not match them, as the
ranges that ``agentbench_rl/envs/webshop/search.py`` holds in ``_SYMBOLS``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data" / "webshop"
FIXTURE = Path(__file__).resolve().parent / "pyserini_top50.json.gz"
#: Queries whose scores the fixture also records (all 50 results each).
SCORED_QUERIES = 100
TOP_K = 50


def query_digest(queries: list[str]) -> list[str]:
    """First 16 hex digits of each query's sha256 (the fixture checks it has the same queries)."""
    return [hashlib.sha256(query.encode("utf-8")).hexdigest()[:16] for query in queries]


def export(data_dir: Path, folder: Path) -> tuple[list[str], list[str]]:
    """Write the original's ``documents.jsonl`` and the goal queries into ``folder``.

    Each document has the original's ``id`` and ``contents``; the original also stores the
    product dict (``product``), which only the raw field keeps and no search reads.
    """
    from agentbench_rl.envs.webshop.data import load_catalogue
    from agentbench_rl.envs.webshop.env import search_query
    from agentbench_rl.envs.webshop.goals import build_goals
    from agentbench_rl.envs.webshop.search import product_document
    from agentbench_rl.envs.webshop.world import PRICE_SEED, STANDARD

    rng = random.Random(PRICE_SEED)
    catalogue = load_catalogue(data_dir, STANDARD.catalogue, STANDARD.num_products, False, rng)
    goals = build_goals(catalogue, human=False, rng=rng)
    (folder / "collection").mkdir()
    with open(folder / "collection" / "documents.jsonl", "w", encoding="utf-8") as out:
        for product in catalogue.products:
            doc = {"id": product.asin, "contents": product_document(product)}
            out.write(json.dumps(doc) + "\n")
    queries = [search_query(goal.instruction_text) for goal in goals]
    (folder / "queries.json").write_text(json.dumps(queries), "utf-8")
    return [product.asin for product in catalogue.products], queries


def search(folder: Path) -> None:
    """(In the pyserini venv.) Index as ``run_indexing.sh`` does, then search every query."""
    index = folder / "index"
    subprocess.run(
        [sys.executable, "-m", "pyserini.index.lucene", "--collection", "JsonCollection",
         "--input", str(folder / "collection"), "--index", str(index),
         "--generator", "DefaultLuceneDocumentGenerator", "--threads", "1",
         "--storePositions", "--storeDocvectors", "--storeRaw"],
        check=True,
    )  # fmt: skip
    from importlib.metadata import version

    from pyserini.pyclass import autoclass  # pyserini's jnius, with Anserini on the classpath
    from pyserini.search.lucene import LuceneSearcher

    searcher = LuceneSearcher(str(index))  # BM25, k1 = 0.9, b = 0.4: the original's searcher
    queries = json.loads((folder / "queries.json").read_text("utf-8"))
    results = []
    for query in queries:
        hits = searcher.search(query, k=TOP_K)
        results.append([[hit.docid, hit.score] for hit in hits])
    lucene = autoclass("org.apache.lucene.util.Version").LATEST.toString()
    meta = {"pyserini": version("pyserini"), "lucene": lucene}
    (folder / "hits.json").write_text(json.dumps({"meta": meta, "hits": results}), "utf-8")


def symbols() -> str:
    """(In the pyserini venv.) Lucene's token symbols that are not word characters, as ranges."""
    import regex
    from pyserini.analysis import Analyzer, get_lucene_analyzer

    analyzer = Analyzer(get_lucene_analyzer(stemming=False, stopwords=False))
    points = [c for c in range(0x21, 0x30000) if not 0xD800 <= c <= 0xDFFF]
    kept: set[int] = set()
    for start in range(0, len(points), 2000):  # one code point per token, space-separated
        chunk = points[start : start + 2000]
        tokens = set(analyzer.analyze(" ".join(chr(c) for c in chunk)))
        kept.update(c for c in chunk if chr(c).lower() in tokens or chr(c) in tokens)
    word = regex.compile(r"\w")  # as search.py: word characters include marks
    ranges: list[list[int]] = []
    for point in sorted(c for c in kept if not word.match(chr(c))):
        if ranges and ranges[-1][1] == point - 1:
            ranges[-1][1] = point
        else:
            ranges.append([point, point])

    def escape(c: int) -> str:
        return f"\\u{c:04X}" if c < 0x10000 else f"\\U{c:08X}"

    return "".join(escape(a) if a == b else f"{escape(a)}-{escape(b)}" for a, b in ranges)


def fixture(asins: list[str], queries: list[str], found: dict[str, Any]) -> dict[str, Any]:
    """The fixture: rankings as indices into the asin list, scores of the first queries."""
    position = {asin: index for index, asin in enumerate(asins)}
    hits = found["hits"]
    return {
        "what": "pyserini top-50 product ids for every WebShop goal instruction (1k, synthetic)",
        "made_by": "envs/webshop/pyserini_rankings.py",
        **found["meta"],
        "asins": asins,
        "query_sha256_16": query_digest(queries),
        "top50": [[position[docid] for docid, _ in ranked] for ranked in hits],
        "scores": [[score for _, score in ranked] for ranked in hits[:SCORED_QUERIES]],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    searching = sub.add_parser("search", help="(internal) run in the pyserini venv")
    searching.add_argument("folder", type=Path)
    sub.add_parser("symbols", help="(run with the pyserini python) print Lucene's token symbols")
    parser.add_argument("--pyserini-python", default="python", help="python that has pyserini")
    parser.add_argument("--data-dir", type=Path, default=None, help="the WebShop data folder")
    parser.add_argument("--work-dir", type=Path, default=None, help="keep index and hits here")
    parser.add_argument("--output", type=Path, default=FIXTURE, help="the fixture to write")
    args = parser.parse_args()
    if args.command == "search":
        search(args.folder)
        return 0
    if args.command == "symbols":
        print(symbols())
        return 0
    data_dir = args.data_dir or Path(os.environ.get("WEBSHOP_DATA") or SHARED_DATA)
    folder = args.work_dir or Path(tempfile.mkdtemp(prefix="webshop-pyserini-"))
    folder.mkdir(parents=True, exist_ok=True)
    asins, queries = export(data_dir, folder)
    command = [args.pyserini_python, str(Path(__file__).resolve()), "search", str(folder)]
    subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": ""})
    found = json.loads((folder / "hits.json").read_text("utf-8"))
    payload = json.dumps(fixture(asins, queries, found), separators=(",", ":")).encode("utf-8")
    scratch = args.output.with_suffix(".tmp")
    scratch.write_bytes(gzip.compress(payload, compresslevel=9, mtime=0))
    os.replace(scratch, args.output)
    print(f"wrote {args.output} ({args.output.stat().st_size:,} bytes, {len(queries):,} queries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
