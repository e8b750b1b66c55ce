"""Serving and files: ``leaderboard serve`` answers only regular files that lie under the root
(no symlink out, no listings, no hidden files) on 127.0.0.1, and every file and filed folder the
project writes has the mode the umask gives, so another user's web server can read the boards.
"""

from __future__ import annotations

import os
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentbench_rl.core.atomic import atomic_write_text, current_umask
from agentbench_rl.harness.evaluate import EvalConfig, evaluate
from agentbench_rl.leaderboard.render import render
from agentbench_rl.leaderboard.serve import make_server
from agentbench_rl.leaderboard.store import submit

METADATA = (
    '{"name": "random", "estimator": null, "training": null, "parameters": null, "seeds": [0],'
    ' "code_version": "test", "contact": "tests", "url": null}'
)


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    scratch = tmp_path_factory.mktemp("serve")
    run = scratch / "run"
    evaluate(EvalConfig(env="sokoban", split="val", agent="random", seeds=[0]), run)
    (run / "metadata.json").write_text(METADATA)
    root = scratch / "boards"
    filed = submit(run, root)
    render(root)
    secret = scratch / "secret.txt"
    secret.write_text("outside the site")
    (filed / "leak.txt").symlink_to(secret)
    (filed / "leak-dir").symlink_to(scratch, target_is_directory=True)
    (root / ".hidden").write_text("staging")
    return root


@pytest.fixture(scope="module")
def base_url(board: Path) -> Iterator[str]:
    server = make_server(board, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host!s}:{port}"
    finally:
        server.shutdown()
        server.server_close()


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def filed_path(board: Path) -> str:
    (folder,) = [path.parent for path in board.glob("*/*/*/metadata.json")]
    return folder.relative_to(board).as_posix()


def test_the_server_binds_to_localhost_by_default(board: Path) -> None:
    server = make_server(board, port=0)
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()


def test_regular_files_under_the_root_are_served(base_url: str, board: Path) -> None:
    assert status(f"{base_url}/site/index.html") == 200
    assert status(f"{base_url}/{filed_path(board)}/episodes.csv") == 200


def test_an_entry_link_opens_a_listing_of_its_own_files(base_url: str, board: Path) -> None:
    """The board links each entry to its folder: that folder lists its regular files."""
    with urllib.request.urlopen(f"{base_url}/{filed_path(board)}/") as response:
        page = response.read().decode("utf-8")
    assert 'href="episodes.csv"' in page and 'href="metadata.json"' in page
    assert "leak" not in page  # the symlinks out of the root are not listed
    assert status(f"{base_url}/{filed_path(board)}") != 200  # a listing only with its slash


@pytest.mark.parametrize(
    "path",
    [
        "{filed}/leak.txt",  # a symlink to a file outside the root
        "{filed}/leak-dir/secret.txt",  # through a symlinked folder
        "site/",
        "",
        ".hidden",
        "../secret.txt",
        "%2e%2e/secret.txt",
        "{filed}/no-such-file",
    ],
)
def test_everything_else_is_not_found(base_url: str, board: Path, path: str) -> None:
    assert status(f"{base_url}/{path.format(filed=filed_path(board))}") == 404


@pytest.fixture
def umask_002() -> Iterator[None]:
    previous = os.umask(0o002)
    try:
        yield
    finally:
        os.umask(previous)


def test_current_umask_reads_the_mask(umask_002: None) -> None:
    assert current_umask() == 0o002


def test_atomic_files_take_the_umask(tmp_path: Path, umask_002: None) -> None:
    target = tmp_path / "x.json"
    atomic_write_text(target, "{}")
    assert target.stat().st_mode & 0o777 == 0o664  # 0666 less 002


def test_filed_folders_and_rendered_files_take_the_umask(tmp_path: Path, umask_002: None) -> None:
    run = tmp_path / "run"
    evaluate(EvalConfig(env="sokoban", split="val", agent="expert", seeds=[0]), run)
    (run / "metadata.json").write_text(METADATA.replace('"random"', '"expert"'))
    root = tmp_path / "boards"
    filed = submit(run, root)
    render(root)
    assert filed.stat().st_mode & 0o777 == 0o775
    for path in [*filed.iterdir(), root / "README.md", root / "site" / "index.html"]:
        assert path.stat().st_mode & 0o777 == 0o664, path
    assert (run / "summary.json").stat().st_mode & 0o777 == 0o664
