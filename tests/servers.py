"""Servers for tests, on a free port of 127.0.0.1: a real ``python -m llama_cpp.server`` (the bundled
SmolLM2 with its full context), a scripted HTTP service run in a thread, and a two-node Ray cluster."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest


class JSONHandler(http.server.BaseHTTPRequestHandler):
    """A request handler for scripted JSON services: reads a request's JSON body, sends a JSON reply,
    and logs nothing."""

    def json_body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")

    def send_json(self, status: int, body) -> None:
        """Reply ``body`` (bytes as they are, else as JSON); a client that gave up (a timeout test) is let go."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def http_service(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` in a thread; yields the base URL (``http://127.0.0.1:PORT``) and stops it on exit."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def llama_server(log: Path, *extra: str, ready_within: float = 180.0) -> Iterator[str]:
    """Start the server (its output in ``log``), wait until it answers /v1/models, yield its base
    URL, and stop it on exit. A server that dies or never answers fails the test with its log."""
    pytest.importorskip("llama_cpp.server")
    from flarebench.strategies.backends import smollm2_path
    from flarebench.strategies.llamacpp import default_threads

    port = free_port()
    # As many threads as the in-process model, for prefill too (the server's batch threads default to
    # every core, which under `-n 2` spin against the other worker's model): the cores are shared alike.
    threads = str(default_threads())
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_path()), "--n_ctx", "8192",
           "--n_threads", threads, "--n_threads_batch", threads, "--host", "127.0.0.1", "--port", str(port),
           *extra]  # fmt: skip
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + ready_within
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                pytest.fail(f"llama_cpp.server not ready after {ready_within:.0f} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def ray_cluster(log_dir: Path, env: dict[str, str], cpus_per_node: int = 1) -> Iterator[str]:
    """A Ray cluster of two nodes on 127.0.0.1, `ray start --head` and a second `ray start --address`,
    each in a process group of its own with ``env``; yields the head's address and stops both
    groups on exit (never `ray stop`, which would stop every Ray process of the machine)."""
    ray = str(Path(sys.executable).with_name("ray"))
    port = free_port()
    address = f"127.0.0.1:{port}"
    common = ["--block", "--node-ip-address=127.0.0.1", f"--num-cpus={cpus_per_node}", "--disable-usage-stats"]
    # No autoscaler monitor and no log monitor (nothing to scale; the drivers do not print worker
    # logs): two Python processes fewer per node, each importing Ray (about 8% of test_ray.py's CPU).
    common += ["--no-monitor", "--include-log-monitor=false"]
    nodes = []
    try:
        for name, args in (
            ("head", ["--head", f"--port={port}", "--include-dashboard=false"]),
            ("node", [f"--address={address}"]),
        ):
            with open(log_dir / f"ray-{name}.log", "w") as out:
                nodes.append(
                    subprocess.Popen(
                        [ray, "start", *args, *common],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                    )  # fmt: skip
                )
            if name == "head":
                _wait_for_port(port, nodes[0], log_dir / "ray-head.log")
        yield address
    finally:
        _stop_nodes(nodes)


def _wait_for_port(port: int, proc: subprocess.Popen, log: Path, within: float = 60.0) -> None:
    deadline = time.time() + within
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail(f"ray start --head did not come up:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)


def _stop_nodes(nodes: list[subprocess.Popen]) -> None:
    """Stop `ray start --block` processes and everything they started. SIGTERM goes to each `ray
    start` alone, which then stops its node's processes in about a second; sent to the whole group,
    it reaches those processes first and the head's `ray start` hangs until killed. What is left of
    a group after that (or after 10 s) is killed."""
    for node in nodes:
        node.send_signal(signal.SIGTERM)
    deadline = time.time() + 10
    for node in nodes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            node.wait(timeout=max(0.0, deadline - time.time()))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.pid, signal.SIGKILL)
        node.wait()
