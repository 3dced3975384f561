"""aerie-serve as a process for the HTTP tests: a free loopback port, waiting until /health
answers, and at the end a SIGTERM after which the server must exit 0."""
import contextlib
import signal
import socket
import subprocess
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_server(serve, args, startup_s=60):
    """Yields (base_url, port) of `serve --port P *args` once it answers /health."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([serve, "--port", str(port), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + startup_s
        while True:
            try:
                urllib.request.urlopen(base + "/health", timeout=5)
                break
            except OSError:
                assert server.poll() is None, f"server exited ({server.returncode}): {server.stderr.read()[-3000:]}"
                assert time.monotonic() < deadline, "server did not come up"
                time.sleep(0.05)
        yield base, port
    finally:
        server.send_signal(signal.SIGTERM)
        rc = server.wait(timeout=60)
    assert rc == 0, f"server exit {rc}: {server.stderr.read()[-3000:]}"
