"""Serving and files: ``leaderboard serve`` answers only regular files that lie under the root
(no symlink out, no listings, no hidden files) on 127.0.0.1, and every file and filed folder the
project writes has the mode the umask gives, so another user's web server can read the boards.
``serve-env`` (the openenv environment's cases, marked ``openenv``) bounds what any client can
take: sessions without a connection, keep-alives, tokens, bodies, messages, dying servers.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentbench_rl.core.atomic import atomic_write_text, current_umask
from agentbench_rl.core.net import free_port
from agentbench_rl.harness.config import EvalConfig, RunOptions
from agentbench_rl.harness.evaluate import evaluate
from agentbench_rl.leaderboard.render import render
from agentbench_rl.leaderboard.serve import make_server
from agentbench_rl.leaderboard.store import submit
from agentbench_rl.spec.results_folder import JOURNAL_FILE

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


# ------------------------------------------------------------------------------ serve-env
# Hostile clients of a served env (``serve-env``, openenv-core's server): they run in the openenv
# environment (.ci/openenv), where openenv-core is installed.
SERVE_ENV = [sys.executable, "-m", "agentbench_rl.cli", "serve-env"]


@pytest.fixture(scope="module")
def openenv() -> None:
    pytest.importorskip("openenv", reason="needs the openenv extra (.ci/openenv)")


def _served(**limits: object) -> Any:
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.integrations.openenv.server import running_server

    return running_server(EnvSpec(name="sokoban", split="test", max_steps=6), **limits)


def _post(url: str, path: str, body: object, headers: dict[str, str] | None = None) -> Any:
    """(status, JSON answer) of a POST."""
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        url + path, data=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _rpc(method: str, **params: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


async def _play_one(url: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    import websockets

    ws_url = url.replace("http://", "ws://") + "/ws"
    async with websockets.connect(ws_url, additional_headers=headers) as socket_:
        await socket_.send(json.dumps({"type": "reset", "data": {"task_id": "test-0000"}}))
        answer: dict[str, Any] = json.loads(await socket_.recv())
        return answer


@pytest.mark.openenv
def test_sessions_without_a_connection_cannot_lock_out_websocket_clients(openenv: None) -> None:
    """64 POST /mcp openenv/session/create took every session of a 64-session server: they
    count against their own small limit, and the WebSocket clients still get sessions."""
    with _served(max_sessions=6, max_detached_sessions=2) as url:
        made = [_post(url, "/mcp", _rpc("openenv/session/create"))[1] for _ in range(64)]
        assert sum("result" in answer for answer in made) == 2
        refused = [answer["error"]["message"] for answer in made if "error" in answer]
        assert len(refused) == 62 and "limited to 2 at once" in refused[0]
        for _ in range(4):
            assert asyncio.run(_play_one(url))["type"] == "observation"


@pytest.mark.openenv
def test_keep_alives_do_not_renew_a_session_that_plays_nothing(openenv: None) -> None:
    """A ``tools/list`` every half second kept a connectionless session past the idle timeout
    forever; only a reset or a step renews a session now."""
    with _served(max_sessions=2, max_detached_sessions=2, idle_timeout=1.0) as url:
        created = _post(url, "/mcp", _rpc("openenv/session/create"))[1]
        session = created["result"]["session_id"]
        deadline = time.monotonic() + 15  # the reaper looks every 5 s
        while True:
            kept = _post(url, "/mcp", _rpc("tools/list", session_id=session))[1]
            if "Unknown session_id" in json.dumps(kept):
                break
            assert time.monotonic() < deadline, "a keep-alive renewed the session"
            time.sleep(0.5)


@pytest.mark.openenv
def test_a_token_is_required_on_every_route_when_set(
    openenv: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import websockets

    from agentbench_rl.envs.spec import EnvSpec

    with _served(token="s3cret") as url:
        for path in ("/health", "/schema", "/state"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(url + path, timeout=30)
            assert refused.value.code == 401
        assert _post(url, "/reset", {}, {"Authorization": "Bearer wrong"})[0] == 401
        assert _post(url, "/reset", {}, {"Authorization": "Bearer s3cret"})[0] == 200
        with pytest.raises(websockets.InvalidStatus):
            asyncio.run(_play_one(url))
        good = asyncio.run(_play_one(url, {"Authorization": "Bearer s3cret"}))
        assert good["type"] == "observation"
        spec = EnvSpec(name="sokoban", split="test", max_steps=6)
        with pytest.raises(ConnectionError, match="403"):
            spec.make(server=url)
        monkeypatch.setenv("AGENTBENCH_SERVER_TOKEN", "s3cret")  # what our clients send
        remote = spec.make(server=url)
        assert remote.reset(options={"task_id": "test-0001"})[1]["task_id"] == "test-0001"
        remote.close()


@pytest.mark.openenv
def test_serving_beyond_loopback_without_a_token_warns(openenv: None) -> None:
    port = free_port("0.0.0.0")
    server = subprocess.Popen(
        [*SERVE_ENV, "--host", "0.0.0.0", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AGENTBENCH_SERVER_TOKEN": ""},
    )
    try:
        assert server.stderr is not None
        first, second = server.stderr.readline(), server.stderr.readline()
        assert first.startswith("warning: serving beyond this machine (0.0.0.0) without a token")
        assert second.startswith(f"serving sokoban/test on http://0.0.0.0:{port}")
    finally:
        server.terminate()
        server.wait(timeout=10)


class SurrogateAgent:
    """Answers with text holding a lone surrogate (no encoding can carry it), then moves."""

    def act(self, observation: object, info: dict[str, Any]) -> str:
        return "\udcff<action>up\udcff</action>" if info.get("steps", 0) % 2 else "down"


@pytest.mark.openenv
def test_an_action_no_encoding_carries_plays_as_locally(openenv: None, tmp_path: Path) -> None:
    """A lone surrogate desynced the served episode (the env stepped, the answer could not be
    sent) and the served eval died with a 79-line traceback where the local one succeeded."""
    from agentbench_rl.envs.spec import EnvSpec

    spec = EnvSpec(name="sokoban", split="test", max_steps=6)
    local = spec.make()
    with _served() as url:
        remote = spec.make(server=url)
        for env in (local, remote):
            env.reset(seed=0, options={"task_id": "test-0000"})
        for action in ("up\udcff", "<action>\ud800left</action>", "left"):
            here, there = local.step(action), remote.step(action)
            assert here[1:] == there[1:] and here[0] == there[0]
        assert here[4]["action_canonical"] == "left"
        remote.close()
        agent = f"python:{__name__}:SurrogateAgent"
        config = EvalConfig(env="sokoban", split="test", agent=agent, limit=3, max_steps=6)
        evaluate(config, tmp_path / "local")
        evaluate(config, tmp_path / "served", RunOptions(env_server=url))
    episodes = (tmp_path / "served" / "episodes.csv").read_bytes()
    assert episodes == (tmp_path / "local" / "episodes.csv").read_bytes()


@pytest.mark.openenv
def test_a_server_dying_mid_run_is_one_line_and_resume_finishes(
    openenv: None, tmp_path: Path
) -> None:
    """The server is killed mid-evaluation: one line naming it and how to go on; the journal
    holds what finished; on a new server, --resume writes the local run's files. (The agent
    waits 50 ms a step, so the kill lands mid-run.)"""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    (tmp_path / "slow_agent.py").write_text(
        "import time\n\ndef act(observation, info):\n    time.sleep(0.05)\n    return 'up'\n"
    )

    def start() -> subprocess.Popen[str]:
        server = subprocess.Popen(
            [*SERVE_ENV, "--split", "val", "--max-steps", "10", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert server.stderr is not None and "serving" in server.stderr.readline()
        return server

    eval_args = [
        *(sys.executable, "-m", "agentbench_rl.cli", "eval", "--split", "val", "--limit", "12"),
        *("--agent", "python:slow_agent:act", "--max-steps", "10"),
    ]
    run_env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    server = start()
    out = tmp_path / "served"
    try:
        client = subprocess.Popen(
            [*eval_args, "--env-server", url, "--out", str(out)],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            cwd=tmp_path,
            env=run_env,
        )
        journal = out / JOURNAL_FILE
        deadline = time.monotonic() + 60
        while not (journal.is_file() and journal.read_text().count("\n") >= 2):
            assert time.monotonic() < deadline and client.poll() is None
            time.sleep(0.05)
        server.kill()
        server.wait()
        _, err = client.communicate(timeout=60)
    finally:
        server.kill()
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert client.returncode == 2 and "Traceback" not in err and len(errors) == 1, err
    assert f"the env server {url} stopped answering" in errors[0]
    assert errors[0].endswith("rerun with --resume once it answers again")
    done_before = len(journal.read_text().splitlines())
    assert done_before >= 2
    server = start()
    try:
        resumed = subprocess.run(
            [*eval_args, "--env-server", url, "--out", str(out), "--resume"],
            capture_output=True, text=True, cwd=tmp_path, env=run_env, timeout=120,
        )  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming: {done_before} of 12 episodes done" in resumed.stderr
    local = subprocess.run(
        [*eval_args, "--out", str(tmp_path / "local")],
        capture_output=True, text=True, cwd=tmp_path, env=run_env, timeout=120,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr
    assert (out / "episodes.csv").read_bytes() == (tmp_path / "local" / "episodes.csv").read_bytes()


@pytest.mark.openenv
def test_plain_http_refusals_are_one_line_4xx_and_never_a_traceback(openenv: None) -> None:
    port = free_port()
    server = subprocess.Popen(
        [*SERVE_ENV, "--port", str(port), "--body-timeout", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        assert server.stderr is not None and "serving" in server.stderr.readline()
        status, answer = _post(url, "/step", {"action": {"command": "up"}})
        assert status == 400 and "call reset() first" in answer["detail"]
        status, answer = _post(url, "/reset", {"task_id": "no-such-task"})
        assert status == 400 and "no-such-task" in answer["detail"]
        assert _slow_body(port) == 408
        assert _huge_chunked_body(port) == 413
    finally:
        server.terminate()
        _, log = server.communicate(timeout=10)
    assert "Traceback" not in log and "Exception" not in log, log


def _slow_body(port: int) -> int:
    """A body announced as 100 bytes that arrives one byte a second."""
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.putrequest("POST", "/reset")
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Content-Length", "100")
    connection.endheaders()
    try:
        for _ in range(5):
            connection.send(b" ")
            time.sleep(1)
    except OSError:
        pass  # the server cut it: its answer is waiting
    return connection.getresponse().status


def _huge_chunked_body(port: int) -> int:
    """200 MB sent chunked (no Content-Length to refuse it by)."""
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.putrequest("POST", "/reset")
    connection.putheader("Transfer-Encoding", "chunked")
    connection.endheaders()
    chunk = b"x" * (1 << 20)
    try:
        for _ in range(200):
            connection.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    except OSError:
        pass  # the server stopped reading: its answer is waiting
    return connection.getresponse().status


@pytest.mark.openenv
def test_a_json_list_as_a_message_gets_one_line_and_the_session_goes_on(openenv: None) -> None:
    import websockets

    async def exchange(url: str) -> list[dict[str, Any]]:
        async with websockets.connect(url.replace("http://", "ws://") + "/ws") as socket_:
            answers = []
            for message in ("[1, 2]", '"text"', json.dumps({"type": "reset", "data": {}})):
                await socket_.send(message)
                answers.append(json.loads(await socket_.recv()))
            return answers

    with _served() as url:
        listed, text, reset = asyncio.run(exchange(url))
    assert listed["data"]["message"] == "a message must be a JSON object, not a list"
    assert text["data"]["message"] == "a message must be a JSON object, not a str"
    assert reset["type"] == "observation"


@pytest.mark.openenv
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--host", "no-such-host.invalid"], "cannot serve on no-such-host.invalid"),
        (["--env-option", "bogus=1"], "env 'sokoban' takes no option 'bogus' (it takes height"),
    ],
)
def test_serve_env_refuses_before_it_says_it_serves(
    openenv: None, args: list[str], expected: str
) -> None:
    done = subprocess.run([*SERVE_ENV, *args], capture_output=True, text=True, timeout=60)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: {expected}")


@pytest.mark.openenv
def test_a_taken_port_is_refused_before_serving(openenv: None) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*SERVE_ENV, "--port", str(port)], capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 2 and "serving" not in done.stderr
    assert done.stderr.strip() == (
        f"error: port {port} on 127.0.0.1 is taken; pass another --port (--port 0: a free one)"
    )
