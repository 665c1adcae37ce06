"""Real servers on localhost for the tests: an MLflow tracking server (``mlflow server``,
mlflow-skinny's REST API with flask from the test extra, over a SQLite store, serving artifacts from a
local directory) and an S3-compatible object store (``moto_server``, from moto[server] in the test
extra), each started as its own process and stopped with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import closed_port

# moto accepts any credentials; set, they keep pyarrow and boto from asking the cloud for some
S3_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "doctune-test",
    "AWS_SECRET_ACCESS_KEY": "doctune-test",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def _serving(command: list[str], health: str, directory: Path, name: str, start_timeout: float) -> Iterator[None]:
    """Run ``command`` (its output in ``directory/NAME.log``) until the block ends, once ``health``
    answers 200; stop it and its children on exit."""
    log_path = directory / f"{name}.log"
    log = log_path.open("w")
    server = subprocess.Popen(command, cwd=directory, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                with urllib.request.urlopen(health, timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert server.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, f"{name} did not answer within {start_timeout:.0f} s"
            time.sleep(1)
        yield
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def _script(name: str) -> str:
    return str(Path(sys.executable).parent / name)


@contextmanager
def mlflow_server(directory: Path, start_timeout: float = 180.0) -> Iterator[str]:
    """``mlflow server`` with its store and artifacts in ``directory``; yields its URL."""
    port = closed_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        _script("mlflow"), "server",
        "--backend-store-uri", f"sqlite:///{directory}/server.db",
        "--artifacts-destination", str(directory / "server-artifacts"),
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
    ]  # fmt: skip
    with _serving(command, f"{url}/health", directory, "mlflow-server", start_timeout):
        yield url


@dataclass(frozen=True)
class S3Server:
    endpoint: str  # host:port

    def create_bucket(self, bucket: str) -> None:
        import pyarrow.fs

        filesystem = pyarrow.fs.S3FileSystem(
            endpoint_override=self.endpoint, scheme="http", allow_bucket_creation=True, region="us-east-1"
        )
        filesystem.create_dir(bucket)

    def uri(self, bucket: str, prefix: str) -> str:
        """The ``--storage`` URI of ``prefix`` in ``bucket`` on this server."""
        return f"s3://{bucket}/{prefix}?endpoint_override={self.endpoint}&scheme=http"


@contextmanager
def s3_server(directory: Path, start_timeout: float = 120.0) -> Iterator[S3Server]:
    """``moto_server`` on localhost (S3 in memory); yields it with the credentials set in ``os.environ``
    (restored on exit), so this process and the commands it starts reach it."""
    port = closed_port()
    saved = {key: os.environ.get(key) for key in S3_ENVIRONMENT}
    os.environ.update(S3_ENVIRONMENT)
    try:
        command = [_script("moto_server"), "-H", "127.0.0.1", "-p", str(port)]
        with _serving(command, f"http://127.0.0.1:{port}/moto-api/", directory, "s3-server", start_timeout):
            yield S3Server(f"127.0.0.1:{port}")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
