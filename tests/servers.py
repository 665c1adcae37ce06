"""A real MLflow tracking server on localhost for the tests: ``mlflow server`` (mlflow-skinny's REST
API, with flask from the test extra) over a SQLite store, serving artifacts from a local directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import closed_port


@contextmanager
def mlflow_server(directory: Path, start_timeout: float = 180.0) -> Iterator[str]:
    """Start ``mlflow server`` with its store and artifacts in ``directory``; yields its URL once it
    answers, and stops it (and its web workers) on exit."""
    port = closed_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        str(Path(sys.executable).parent / "mlflow"), "server",
        "--backend-store-uri", f"sqlite:///{directory}/server.db",
        "--artifacts-destination", str(directory / "server-artifacts"),
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
    ]  # fmt: skip
    log = (directory / "mlflow-server.log").open("w")
    server = subprocess.Popen(command, cwd=directory, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert server.poll() is None, (directory / "mlflow-server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, f"mlflow server did not answer within {start_timeout:.0f} s"
            time.sleep(1)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
