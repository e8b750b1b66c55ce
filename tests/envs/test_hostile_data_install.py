"""Hostile targets and archives for ``data install``: a user's file is never replaced, an existing
folder keeps its mode, a symlinked data folder keeps its link, a killed install's staging folder
is removed by the next one, and a compression bomb stops long before the size cap."""

from __future__ import annotations

import contextlib
import io
import os
import socket
import stat
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agentbench_rl.envs.alfworld.data import (
    DATA_ROOT,
    InstallError,
    install_archive,
    shipped_data_dir,
)
from agentbench_rl.envs.webshop.install import InstallError as WebShopInstallError
from agentbench_rl.envs.webshop.install import install_webshop

#: An installer under test: installs into a folder and names a file it must have put there.
Installer = Callable[[Path], Path]


def _alfworld_demo(tmp_path: Path) -> Installer:
    """ALFWorld's installer on an archive of the six games the package ships: no benchmark
    data needed, so these cases run everywhere (CI included)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    archive = tmp_path / "demo.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(shipped_data_dir() / DATA_ROOT, arcname=DATA_ROOT)

    def install(target: Path) -> Path:
        install_archive(archive, target, splits=("demo",))
        return target / DATA_ROOT / "demo"

    return install


def _webshop(tmp_path: Path, shared_data_dir: Path) -> Installer:
    def install(target: Path) -> Path:
        install_webshop(str(shared_data_dir / "webshop"), target)
        return target / "items_shuffle_1000.json"

    return install


@pytest.fixture(params=["alfworld-demo", "webshop"])
def installer(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Installer]:
    """(the name the staging folders carry, the installer): ALFWorld's on the shipped demo
    games, and WebShop's where its data is (``shared_data_dir`` skips it elsewhere)."""
    if request.param == "alfworld-demo":
        return DATA_ROOT, _alfworld_demo(tmp_path / "archive")
    return "webshop", _webshop(tmp_path, request.getfixturevalue("shared_data_dir"))


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_data_dir_that_is_a_file_is_refused_and_kept(
    installer: tuple[str, Installer], tmp_path: Path
) -> None:
    mine = tmp_path / "notes.txt"
    mine.write_text("the user's own file")
    with pytest.raises((InstallError, WebShopInstallError), match=r"notes\.txt is a file, not"):
        installer[1](mine)
    assert mine.read_text() == "the user's own file"


def test_an_existing_folder_keeps_its_mode_and_a_new_one_takes_the_umask(
    installer: tuple[str, Installer], tmp_path: Path
) -> None:
    existing = tmp_path / "existing"
    existing.mkdir()
    os.chmod(existing, 0o755)
    installer[1](existing)
    assert stat.S_IMODE(existing.stat().st_mode) == 0o755
    mask = os.umask(0o027)
    try:
        fresh = tmp_path / "fresh"
        installer[1](fresh)
    finally:
        os.umask(mask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o750


def test_a_symlinked_data_dir_keeps_its_link(
    installer: tuple[str, Installer], tmp_path: Path
) -> None:
    real = tmp_path / "disk" / "data"
    real.mkdir(parents=True)
    link = tmp_path / "data"
    link.symlink_to(real, target_is_directory=True)
    installed = installer[1](link)
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert (real / installed.relative_to(link)).exists()


def test_a_killed_installs_staging_folder_is_removed_by_the_next(
    installer: tuple[str, Installer], tmp_path: Path
) -> None:
    name, install = installer
    target = tmp_path / ("data" if name == DATA_ROOT else name)
    target.mkdir()
    where = target if name == DATA_ROOT else tmp_path  # ALFWorld stages beside json_2.1.1
    leaked = where / f".{name}.staging-{dead_pid()}-abc123"
    (leaked / "big").mkdir(parents=True)
    (leaked / "big" / "part").write_bytes(b"x" * 1000)
    running = where / f".{name}.staging-{os.getpid()}-def456"  # a live install's: kept
    running.mkdir()
    install(target)
    assert not leaked.exists() and running.is_dir()


def test_a_compression_bomb_stops_at_a_hundred_times_its_size(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.tar.gz"
    zeros = b"\0" * (40 << 20)
    with tarfile.open(bomb, "w:gz") as archive:
        member = tarfile.TarInfo("json_2.1.1/valid_seen/a-b-c-d-1/trial_T1/game.tw-pddl")
        member.size = len(zeros)
        archive.addfile(member, io.BytesIO(zeros))
    size = bomb.stat().st_size
    assert size * 100 < len(zeros)  # the case the test is about: 40 MiB from ~40 KB
    with pytest.raises(InstallError, match=f"more than 100 times its {size:,} bytes"):
        install_archive(bomb, tmp_path / "data")
    assert not any((tmp_path / "data").glob(".json_2.1.1.staging-*"))


@pytest.mark.timeout(60)
def test_a_dripping_download_is_cut_off(tmp_path: Path) -> None:
    from agentbench_rl.envs.install import ByteBudget, DownloadError, download

    listener = socket.create_server(("127.0.0.1", 0))

    def drip() -> None:
        connection, _ = listener.accept()
        connection.recv(65536)
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n")
        with contextlib.suppress(OSError):  # the client gives up part way
            for _ in range(10000):
                connection.sendall(b"x")
                time.sleep(0.05)
        connection.close()

    threading.Thread(target=drip, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/data.zip"
    began = time.monotonic()
    with pytest.raises(DownloadError, match=r"under 1,024 bytes/s"):
        download(url, tmp_path / "data.zip", ByteBudget(10**6, "x"), timeout=1.0)
    assert time.monotonic() - began < 10  # the drip alone takes 500 s
    listener.close()
