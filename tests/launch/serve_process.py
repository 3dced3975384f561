"""aerie-serve as a process for the HTTP tests: a free loopback port, waiting until /health
answers, and at the end a SIGTERM after which the server must exit 0; and the greedy
aerie-generate outputs those tests compare the server's against."""
import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request


def greedy_reference(generate, prompts, max_new_tokens):
    """aerie-generate's greedy output ids (dummy weights, EOS ignored) for each prompt."""
    cmd = [generate, "--load-format", "dummy", "--max-new-tokens", str(max_new_tokens), "--temperature", "0", "--ignore-eos",
           "--output", "json"]
    for p in prompts:
        cmd += ["--input-ids", ",".join(map(str, p))]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return [json.loads(l)["output_ids"] for l in out.stdout.splitlines()]


def rank_pids(launcher_pid):
    """{rank: pid} of the processes mpirun (pid `launcher_pid`) started: its children, each
    named by the OMPI_COMM_WORLD_RANK of its environment."""
    pids = {}
    for pid in subprocess.run(["pgrep", "-P", str(launcher_pid)], capture_output=True, text=True).stdout.split():
        try:
            for e in open(f"/proc/{pid}/environ", "rb").read().split(b"\0"):
                if e.startswith(b"OMPI_COMM_WORLD_RANK="):
                    pids[int(e.split(b"=")[1])] = int(pid)
        except OSError:  # it has ended meanwhile
            pass
    return pids


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(argv_for, stderr, startup_s):
    """One launch of argv_for(port) on a fresh port: (server, port), or None when the server
    could not listen on it (another process took the port between free_port() and the server's
    bind: tests run in parallel, and mpirun opens ports of its own)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # A log file the caller passes holds every attempt: this one's starts here.
    log_start = None if stderr is subprocess.PIPE else os.path.getsize(stderr.name)
    server = subprocess.Popen(argv_for(port), stdout=subprocess.DEVNULL if stderr is not subprocess.PIPE else subprocess.PIPE,
                              stderr=stderr, text=True)
    deadline = time.monotonic() + startup_s
    while True:
        try:
            urllib.request.urlopen(base + "/health", timeout=5)
            return server, port
        except OSError:
            if server.poll() is not None:
                if server.stderr:
                    log = server.stderr.read()
                else:
                    with open(stderr.name, "rb") as f:
                        f.seek(log_start)
                        log = f.read().decode(errors="replace")
                if "cannot listen on" in log:
                    return None
                raise AssertionError(f"server exited ({server.returncode}): {log[-3000:]}")
            if time.monotonic() >= deadline:
                server.kill()
                raise AssertionError("server did not come up")
            time.sleep(0.05)


def start_on_free_port(argv_for, stderr=subprocess.PIPE, startup_s=60):
    """(server, port) once argv_for(port), the server's command line on that port, answers
    /health. stderr: a file for the server's log (default: a pipe, read back for failure
    messages). A port taken before the server could bind it is replaced by another (three tries)."""
    for _ in range(3):
        started = _start(argv_for, stderr, startup_s)
        if started:
            return started
    raise AssertionError("the server found no free port in three tries")


@contextlib.contextmanager
def running_server(serve, args, startup_s=60, launcher=(), stderr=subprocess.PIPE):
    """Yields (base_url, port) of `[launcher...] serve --port P *args` once it answers /health
    (launcher: e.g. an mpirun command line). Under a launcher only a bounded exit is checked:
    Open MPI's mpirun answers SIGTERM by killing the job and exits 1 itself. stderr: a file to
    keep the server's log in (default: read back for failure messages). A port taken before the
    server could bind it is replaced by another (three tries)."""
    server, port = start_on_free_port(lambda p: [*launcher, serve, "--port", str(p), *args], stderr, startup_s)

    def tail():
        return server.stderr.read()[-3000:] if server.stderr else "(see the server's stderr file)"
    try:
        yield f"http://127.0.0.1:{port}", port
    finally:
        server.send_signal(signal.SIGTERM)
        rc = server.wait(timeout=60)
    assert rc == 0 or launcher, f"server exit {rc}: {tail()}"
