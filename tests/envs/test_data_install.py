"""Installing ALFWorld and WebShop data: staged, checked, then swapped in; a truncated, corrupt,
oversized or wrong source never touches a good install; downloads tested on 127.0.0.1."""

from __future__ import annotations

import functools
import hashlib
import http.server
import importlib.util
import json
import shutil
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentbench_rl.envs.alfworld.data import InstallError, install_archive, install_from_url
from agentbench_rl.envs.webshop.install import InstallError as WebShopInstallError
from agentbench_rl.envs.webshop.install import install_webshop

VALID_SPLITS = ("valid_seen", "valid_unseen")
SEEN_GAME = (
    "json_2.1.1/valid_seen/look_at_obj_in_light-AlarmClock-None-DeskLamp-323/"
    "trial_T20190909_044715_250790/game.tw-pddl"
)


def tree_digest(folder: Path) -> str:
    """Hash of every file (path and bytes) under ``folder``: equal digests, equal trees."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _archive(source: Path, target: Path, edit: bytes | None = None) -> Path:
    """A zip or tar.gz of the valid splits' games; ``edit`` replaces one game's bytes."""
    files = sorted((source / "json_2.1.1").rglob("game.tw-pddl"))
    if target.suffix == ".zip":
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
            for file in files:
                name = file.relative_to(source).as_posix()
                archive.writestr(name, edit if edit and name == SEEN_GAME else file.read_bytes())
    else:
        with tarfile.open(target, "w:gz") as archive:
            for file in files:
                archive.add(file, file.relative_to(source).as_posix())
    return target


@pytest.fixture(scope="module")
def archives(alfworld_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("archives")
    good_zip = _archive(alfworld_data, folder / "games.zip")
    good_tar = _archive(alfworld_data, folder / "games.tar.gz")
    truncated = folder / "truncated.tar.gz"
    truncated.write_bytes(good_tar.read_bytes()[: good_tar.stat().st_size // 2])
    # Corrupt: flip bytes inside the compressed data of a member in the middle of the zip (the
    # central directory at the end stays intact, so only reading that member fails its CRC).
    data = bytearray(good_zip.read_bytes())
    with zipfile.ZipFile(good_zip) as zip_file:
        info = zip_file.infolist()[len(zip_file.infolist()) // 2]
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for offset in range(start + 10, start + 20):
        data[offset] ^= 0xFF
    corrupt = folder / "corrupt.zip"
    corrupt.write_bytes(bytes(data))
    modified = _archive(alfworld_data, folder / "modified.zip", edit=b'{"edited": true}')
    return {
        "zip": good_zip,
        "tar": good_tar,
        "truncated": truncated,
        "corrupt": corrupt,
        "modified": modified,
    }


@pytest.fixture
def good_install(archives: dict[str, Path], tmp_path: Path) -> Path:
    data = tmp_path / "data"
    report = install_archive(archives["tar"], data, splits=VALID_SPLITS)
    assert report.extracted == 274  # 140 valid_seen + 134 valid_unseen games
    (data / "keep-me.txt").write_text("not ours")  # beside json_2.1.1: never touched
    return data


@pytest.mark.parametrize(
    ("name", "max_bytes", "message"),
    [
        ("truncated", None, "truncated or corrupt"),
        ("corrupt", None, "truncated or corrupt"),
        ("zip", 100_000, "more than 100,000 bytes"),
        ("modified", None, r"1 game file\(s\)"),
    ],
)
def test_a_bad_archive_leaves_the_previous_install_untouched(
    archives: dict[str, Path], good_install: Path, name: str, max_bytes: int | None, message: str
) -> None:
    before = tree_digest(good_install)
    kwargs = {} if max_bytes is None else {"max_bytes": max_bytes}
    with pytest.raises(InstallError, match=message) as caught:
        install_archive(archives[name], good_install, splits=VALID_SPLITS, **kwargs)
    assert "\n" not in str(caught.value) and "untouched" in str(caught.value)
    assert tree_digest(good_install) == before
    assert sorted(p.name for p in good_install.iterdir()) == ["json_2.1.1", "keep-me.txt"]


def test_a_modified_game_is_named_and_installed_only_when_allowed(
    archives: dict[str, Path], good_install: Path
) -> None:
    with pytest.raises(InstallError) as caught:
        install_archive(archives["modified"], good_install, splits=VALID_SPLITS)
    message = str(caught.value)
    assert "valid_seen/look_at_obj_in_light-AlarmClock-None-DeskLamp-323" in message
    assert "--allow-modified-games" in message and "official zip offline" in message
    install_archive(archives["modified"], good_install, splits=VALID_SPLITS, allow_modified=True)
    assert (good_install / SEEN_GAME).read_bytes() == b'{"edited": true}'


def test_a_good_archive_replaces_the_install(archives: dict[str, Path], good_install: Path) -> None:
    stray = good_install / "json_2.1.1" / "valid_seen" / "stray.txt"
    stray.write_text("left from an older install")
    install_archive(archives["zip"], good_install, splits=VALID_SPLITS)
    assert not stray.exists(), "the install is swapped in as a whole"
    assert (good_install / "keep-me.txt").exists()
    assert [p.name for p in good_install.iterdir() if p.name.startswith(".")] == []


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTP server on 127.0.0.1 serving a folder: (base URL, folder)."""
    root = tmp_path / "served"
    root.mkdir()
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


def test_alfworld_download_from_a_local_server(
    archives: dict[str, Path], served: tuple[str, Path], tmp_path: Path
) -> None:
    base, root = served
    shutil.copy(archives["zip"], root / "json_2.1.2_tw-pddl.zip")
    data = tmp_path / "downloaded"
    report = install_from_url(f"{base}/json_2.1.2_tw-pddl.zip", data, splits=VALID_SPLITS)
    assert [(c.split, c.ok) for c in report.checks] == [("valid_seen", 140), ("valid_unseen", 134)]
    assert sorted(p.name for p in data.iterdir()) == ["json_2.1.1"]  # the zip is not kept
    with pytest.raises(InstallError, match=r"could not download .*HTTP 404"):
        install_from_url(f"{base}/missing.zip", data, splits=VALID_SPLITS)
    with pytest.raises(InstallError, match="more than 1,000 bytes"):
        install_from_url(f"{base}/json_2.1.2_tw-pddl.zip", data, VALID_SPLITS, max_bytes=1000)
    assert report.checks == install_archive(archives["tar"], data, splits=VALID_SPLITS).checks


# ---------------------------------------------------------------------- WebShop
WEBSHOP_FILES = ("items_shuffle_1000.json", "items_ins_v2_1000.json")


def test_webshop_install_from_a_folder_and_a_local_server(
    shared_data_dir: Path, served: tuple[str, Path], tmp_path: Path
) -> None:
    source = shared_data_dir / "webshop"
    data = tmp_path / "webshop"
    result = install_webshop(str(source), data)
    # The 1k pair, plus the human goals under the subset's own name.
    assert result.files == (*WEBSHOP_FILES, "items_human_ins_1k_subset.json")
    assert result.modified == ()
    for name in result.files:
        assert (data / name).read_bytes() == (source / name).read_bytes()
    (data / "index-cache").mkdir()
    (data / "index-cache" / "x").write_text("kept")

    base, root = served
    for name in WEBSHOP_FILES:
        shutil.copy(source / name, root / name)
    again = install_webshop(base, data)
    assert again.files == WEBSHOP_FILES  # the server has no human goals: skipped, not an error
    assert (data / "index-cache" / "x").read_text() == "kept"


def test_webshop_bad_sources_leave_the_install_untouched(
    shared_data_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "webshop"
    install_webshop(str(shared_data_dir / "webshop"), data)
    before = tree_digest(data)
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(shared_data_dir / "webshop" / WEBSHOP_FILES[0], partial)
    with pytest.raises(WebShopInstallError, match=r"has no items_ins_v2_1000\.json"):
        install_webshop(str(partial), data)
    (partial / WEBSHOP_FILES[1]).write_text(json.dumps({"B000000000": {"attributes": []}}))
    with pytest.raises(WebShopInstallError, match=r"items_ins_v2_1000\.json from .* differ"):
        install_webshop(str(partial), data)
    with pytest.raises(WebShopInstallError, match="more than 1,000 bytes"):
        install_webshop(str(shared_data_dir / "webshop"), data, max_bytes=1000)
    assert tree_digest(data) == before
    allowed = install_webshop(str(partial), data, allow_modified=True)
    assert allowed.modified == ("items_ins_v2_1000.json",)


# ---------------------------------------------------------------------- fingerprints in results
@pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("textworld", "alfworld")),
    reason='needs the alfworld extra: pip install -e ".[alfworld]"',
)
def test_results_record_whether_the_games_are_the_pinned_ones(
    alfworld_data: Path, tmp_path: Path
) -> None:
    from agentbench_rl.envs.alfworld.data import load_manifest
    from agentbench_rl.harness.config import EvalConfig
    from agentbench_rl.harness.evaluate import evaluate
    from agentbench_rl.harness.sampling import stratified_sample

    config = EvalConfig(env="alfworld", split="valid_seen", agent="expert", limit=1,
                        env_kwargs={"data_dir": str(alfworld_data)})  # fmt: skip
    pinned = evaluate(config, tmp_path / "pinned").data
    assert pinned == {"fingerprint": load_manifest("valid_seen").checksum, "pinned": True}

    copy = tmp_path / "copy"
    shutil.copytree(alfworld_data / "json_2.1.1" / "valid_seen", copy / "json_2.1.1" / "valid_seen")
    games = load_manifest("valid_seen").games
    played = stratified_sample({game.task_id: game.task_type for game in games}, 1)
    other = next(game for game in games if game.task_id not in played)
    (copy / other.path).write_text('{"edited": true}')
    modified = EvalConfig(
        env="alfworld",
        split="valid_seen",
        agent="expert",
        limit=1,
        env_kwargs={"data_dir": str(copy), "allow_modified_games": True},
    )
    data = evaluate(modified, tmp_path / "modified").data
    assert data is not None and pinned is not None
    assert data["pinned"] is False and data["fingerprint"] != pinned["fingerprint"]


def test_the_board_shows_the_data_state_and_both_intervals() -> None:
    from agentbench_rl.leaderboard.board import Entry
    from agentbench_rl.leaderboard.render import data_text, success_text
    from agentbench_rl.leaderboard.schema import SubmissionMetadata
    from agentbench_rl.leaderboard.validate import SubmissionError, _check_data

    metadata = SubmissionMetadata.model_validate(
        {"name": "a", "estimator": None, "training": None, "parameters": None, "seeds": [0],
         "code_version": "v", "contact": "c", "url": None}
    )  # fmt: skip
    entry = Entry(
        "id",
        metadata,
        0.5,
        (0.5, 0.5),
        "t over seeds",
        {},
        0,
        None,
        None,
        bootstrap_ci95=(0.25, 0.75),
        data={"fingerprint": "ab" * 16, "pinned": False},
    )
    assert success_text(entry) == "50.0 [50.0, 50.0; bootstrap 25.0, 75.0]"
    assert data_text(entry) == "; data modified " + "ab" * 6
    for bad in ({"fingerprint": "<script>", "pinned": False}, {"fingerprint": "ab" * 8}, []):
        with pytest.raises(SubmissionError, match="data must be"):
            _check_data(bad)
