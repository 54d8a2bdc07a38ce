"""A real multi-node Ray cluster on 127.0.0.1, started with ``ray start`` as a user would.

Each node is its own ``ray start`` (the head with ``--head``, the others with ``--address``)
with its own temp dir and ports, so the cluster neither meets nor touches any other Ray on the
machine. Every process it starts carries a marker in its environment; `kill_node` and `stop`
end exactly those, by pid::

    with LocalRayCluster(nodes=2) as cluster:
        run("geosleuth eval … --backend ray --ray-address", cluster.address, env=cluster.env)
        cluster.kill_node(1)  # SIGKILL node 1's raylet and all it started: a lost machine

Node death is noticed after ``health_check_s`` (Ray's default is about 30 s; short here).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from geosleuth.bounds.extras import install_line
from geosleuth.testing.llamacpp import free_port

MARKER = "GEOSLEUTH_TEST_RAY_CLUSTER"


def ray_unavailable() -> str | None:
    """Why a local cluster cannot start here (None when it can)."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        return f"ray is not installed: {install_line('ray')}"
    if importlib.util.find_spec("psutil") is None:
        return "psutil is not installed"
    if not _ray_cli().exists():
        return f"the ray command is missing beside {sys.executable}"
    return None


def _ray_cli() -> Path:
    return Path(sys.executable).with_name("ray")


class LocalRayCluster:
    """``nodes`` Ray nodes (node 0 the head), each with ``cpus`` CPUs, on 127.0.0.1; ``auth`` is
    the ``RAY_AUTH_MODE`` of every node and of `env` (``token``: a fresh token in a file)."""

    def __init__(
        self, nodes: int = 2, cpus: int = 1, health_check_s: float = 1.0, auth: str = "disabled"
    ) -> None:
        self.n_nodes = nodes
        self.cpus = cpus
        self.token = uuid.uuid4().hex
        self.root = Path(tempfile.mkdtemp(prefix="gsray"))  # short: Ray's socket paths live under it
        self.port = free_port()
        period_ms = max(100, int(health_check_s * 1000 / 3))
        self.env = {
            **os.environ,
            MARKER: self.token,
            "RAY_AUTH_MODE": auth,  # the same on every node and the driver (docs/evaluation.md)
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_health_check_period_ms": str(period_ms),
            "RAY_health_check_timeout_ms": str(period_ms),
            "RAY_health_check_failure_threshold": "3",
        }
        if auth == "token":  # one token file handed to every node, as on a real cluster
            token_file = self.root / "auth_token"
            token_file.write_text(uuid.uuid4().hex)
            token_file.chmod(0o600)
            self.env["RAY_AUTH_TOKEN_PATH"] = str(token_file)
        self.node_manager_ports: list[int] = []

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> LocalRayCluster:
        try:
            for index in range(self.n_nodes):
                self._start_node(index)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_node(self, index: int) -> None:
        node_manager_port = free_port()
        args = [
            str(_ray_cli()),
            "start",
            *(["--head", f"--port={self.port}", "--include-dashboard=false"] if index == 0 else []),
            *([f"--address={self.address}"] if index else []),
            "--node-ip-address=127.0.0.1",
            f"--num-cpus={self.cpus}",
            f"--temp-dir={self.root / str(index)}",
            f"--node-manager-port={node_manager_port}",
            f"--object-manager-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--dashboard-agent-grpc-port={free_port()}",
            f"--metrics-export-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}",
            "--min-worker-port=0",
            "--max-worker-port=0",
            "--object-store-memory=80000000",
            "--disable-usage-stats",
        ]
        done = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(
                f"ray start (node {index}) failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            )
        self.node_manager_ports.append(node_manager_port)

    def _processes(self) -> list:  # type: ignore[type-arg]
        """This cluster's processes: those whose environment carries its marker."""
        import psutil

        mine = []
        for proc in psutil.process_iter(["pid"]):
            if proc.pid == os.getpid():
                continue
            with contextlib.suppress(psutil.Error):
                if proc.environ().get(MARKER) == self.token:
                    mine.append(proc)
        return mine

    def raylet_pid(self, index: int) -> int:
        """The pid of node ``index``'s raylet."""
        flag = f"--node_manager_port={self.node_manager_ports[index]}"
        for proc in self._processes():
            with contextlib.suppress(Exception):
                cmdline = proc.cmdline()
                if cmdline and cmdline[0].endswith("raylet") and flag in cmdline:
                    return int(proc.pid)
        raise LookupError(f"no raylet for node {index}")

    def kill_raylet(self, index: int) -> None:
        """SIGKILL node ``index``'s raylet alone: its workers notice and exit, and its agent
        publishes the raylet's last log lines to every driver, as when a raylet crashes."""
        os.kill(self.raylet_pid(index), signal.SIGKILL)

    def kill_node(self, index: int) -> None:
        """SIGKILL node ``index``'s raylet and every process it started (its workers and their
        children), as when the machine is lost: nothing of the node answers any more."""
        import psutil

        raylet = psutil.Process(self.raylet_pid(index))
        family = [raylet, *raylet.children(recursive=True)]
        for proc in family:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)
        psutil.wait_procs(family, timeout=5)

    def stop(self) -> None:
        """End every process of this cluster (by pid: SIGTERM, then SIGKILL) and remove its files."""
        import psutil

        procs = self._processes()
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.terminate()
        _, alive = psutil.wait_procs(procs, timeout=5)
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(alive, timeout=5)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalRayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for(condition, timeout_s: float, every_s: float = 0.1) -> bool:  # type: ignore[no-untyped-def]
    """Poll ``condition()`` until true (True) or ``timeout_s`` passed (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every_s)
    return bool(condition())
