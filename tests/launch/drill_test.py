#!/usr/bin/env python3
"""Failure drills (label `drill`): faults an operator sees, each with its promise measured.

  drill_test.py --serve BIN/aerie-serve --mpirun MPIRUN [--server-flags "..."] [--mpirun-flags "..."] [drill ...]

Drills (all by default), on CPU with the tiny dummy model:
  kill_worker   kill -9 rank 1 mid-stream under DP replicas, TP2 and DP attention: every client
                is told (an SSE error event / a 503) within 5 s, /health turns 503, mpirun exits
                non-zero within 30 s, no process left behind.
  kill_rank0    kill -9 rank 0 mid-stream: clients lose the connection, mpirun exits non-zero
                within 30 s, no process left behind.
  stop_worker   SIGSTOP rank 1 (--heartbeat-timeout 2): clients told within 5 s, /health 503,
                mpirun non-zero within 30 s, the stopped process gone too.
  stall         rank 1 sleeps inside an all-reduce (TP2; AERIE_DRILL_STALL_ALL_REDUCE on that rank
                only, --watchdog-timeout 3): clients told within the watchdog + 3 s, mpirun
                non-zero, no process left behind.
  disconnects   1,000 streaming and non-streaming clients that hang up at random (DP replicas):
                the KV pool is back to empty, nothing runs, /health_generate is 200.
  drain         SIGTERM to a serving aerie-serve: requests in flight finish (200), new ones get
                503, the server exits 0.
Each prints its figures.
"""
import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_process import rank_pids, start_on_free_port  # noqa: E402

TINY = ["--load-format", "dummy", "--model-shape", "tiny", "--max-total-tokens", "60000"]


class Server:
    """aerie-serve under mpirun (or alone), its rank -> pid map, and clean-up of strays."""

    def __init__(self, args, flags, log, np=2, mpmd_rank1_env=None):
        # The server's stderr goes to `log`; a port another process takes first is replaced
        # (serve_process.start_on_free_port).
        self.log = open(log, "w")
        self.proc, self.port = start_on_free_port(lambda port: self._command(args, flags, np, mpmd_rank1_env, port), self.log,
                                                  startup_s=120)
        self.base = f"http://127.0.0.1:{self.port}"
        if np:
            self.ranks = rank_pids(self.proc.pid)
            assert sorted(self.ranks) == list(range(np)), f"rank pids: {self.ranks}"
        else:
            self.ranks = {0: self.proc.pid}

    @staticmethod
    def _command(args, flags, np, mpmd_rank1_env, port):
        """aerie-serve on `port`: alone (np 0), or under mpirun with np ranks."""
        serve = [args.serve, "--port", str(port)] + TINY + args.server_flags.split() + flags
        if np == 0:
            return serve
        mpirun = [args.mpirun, "--allow-run-as-root", "--oversubscribe"] + args.mpirun_flags.split()
        if mpmd_rank1_env:  # rank 1 gets its own environment (MPMD: one program per rank)
            env = sum((["-x", f"{k}={v}"] for k, v in mpmd_rank1_env.items()), [])
            return mpirun + ["-np", "1"] + serve + [":", "-np", "1"] + env + serve
        return mpirun + ["-np", str(np)] + serve

    def wait(self, timeout):
        t0 = time.monotonic()
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        return rc, time.monotonic() - t0

    def leftovers(self, grace=5.0):
        """The ranks still alive, given `grace` seconds to finish dying."""
        deadline = time.monotonic() + grace
        while True:
            alive = self._alive()
            if not alive or time.monotonic() >= deadline:
                return alive
            time.sleep(0.05)

    def _alive(self):
        alive = []
        for pid in self.ranks.values():
            try:
                os.kill(pid, 0)
                state = open(f"/proc/{pid}/stat").read().split()[2]
                if state != "Z":
                    alive.append(pid)
            except OSError:
                pass
        return alive

    def close(self):
        for pid in self._alive():
            os.kill(pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Client(threading.Thread):
    """One /generate request, streaming or not; records when and how it ended."""

    def __init__(self, base, i, stream, new_tokens=1500):
        super().__init__(daemon=True)
        self.base, self.i, self.stream, self.new_tokens = base, i, stream, new_tokens
        self.first_token = threading.Event()
        self.ended_at, self.outcome, self.error = None, None, None

    def run(self):
        body = json.dumps({"input_ids": [3, 5, 7 + self.i], "stream": self.stream,
                           "sampling_params": {"max_new_tokens": self.new_tokens, "temperature": 0, "ignore_eos": True}}).encode()
        req = urllib.request.Request(self.base + "/generate", data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                if not self.stream:
                    self.outcome = f"http {r.status}"
                    return
                for raw in r:
                    line = raw.decode().strip()
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        self.outcome = self.outcome or "finished"
                        break
                    obj = json.loads(payload)
                    if "error" in obj:
                        self.outcome, self.error = "error event", obj["error"]
                        break
                    self.first_token.set()
                if self.outcome is None:
                    self.outcome = "connection lost (no [DONE])"
        except urllib.error.HTTPError as e:
            self.outcome = f"http {e.code}"
            try:
                self.error = json.loads(e.read())["error"]
            except Exception:
                pass
        except Exception as e:  # the connection went away
            self.outcome = f"connection lost ({type(e).__name__})"
        finally:
            self.ended_at = time.monotonic()


def health(base):
    try:
        return urllib.request.urlopen(base + "/health", timeout=2).status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def start_clients(server, streaming=4, plain=2):
    clients = [Client(server.base, i, True) for i in range(streaming)] + [Client(server.base, 100 + i, False) for i in range(plain)]
    for c in clients:
        c.start()
    for c in clients[:streaming]:
        assert c.first_token.wait(60), "a stream produced no token"
    return clients


def fault_drill(args, name, flags, fault, np=2, mpmd_rank1_env=None, told_within=5.0, expect_told=True):
    """Starts a server and clients, injects `fault` (a function of the Server), measures."""
    server = Server(args, flags, np=np, mpmd_rank1_env=mpmd_rank1_env, log=f"/tmp/aerie-drill-{name}.log")
    try:
        clients = start_clients(server)
        t0 = time.monotonic()
        fault(server)
        statuses = []
        for c in clients:
            c.join(60)
        told = [c.ended_at - t0 for c in clients if c.ended_at]
        # /health while rank 0 still serves its grace period (already gone is fine only if rank 0 was the victim)
        statuses.append(health(server.base))
        rc, waited = server.wait(30)
        exit_s = time.monotonic() - t0
        left = server.leftovers()
        outcomes = sorted({c.outcome for c in clients})
        print(f"[{name}] clients: {outcomes}; told after {max(told):.2f} s (slowest of {len(told)}); /health after: {statuses[0]}; "
              f"mpirun exit {rc} after {exit_s:.1f} s; leftover processes: {left}")
        assert all(c.ended_at for c in clients), f"[{name}] a client never ended"
        assert rc is not None and rc != 0, f"[{name}] mpirun exit {rc} (want non-zero within 30 s)"
        assert not left, f"[{name}] processes left behind: {left}"
        if expect_told:
            # A request that completed before the fault was noticed (a fast GPU can finish one
            # while a heartbeat timeout runs) owes no error; every other one must get one.
            told_at = min((c.ended_at for c in clients if c.outcome in ("error event", "http 503")), default=None)
            assert told_at is not None, f"[{name}] no client was told"
            clients = [c for c in clients if not (c.outcome in ("finished", "http 200") and c.ended_at <= told_at + 0.05)]
            told = [c.ended_at - t0 for c in clients]
            assert max(told) <= told_within, f"[{name}] clients told after {max(told):.2f} s (promise: {told_within} s)"
            for c in clients:
                if c.stream:
                    assert c.outcome == "error event" and c.error["code"] == "unavailable", f"[{name}] stream: {c.outcome} {c.error}"
                else:
                    assert c.outcome == "http 503" and c.error["code"] == "unavailable", f"[{name}] plain: {c.outcome} {c.error}"
            assert statuses[0] in (503, None), f"[{name}] /health {statuses[0]} after the fault"
        return max(told)
    finally:
        server.close()


def kill_rank(r, sig):
    return lambda server: os.kill(server.ranks[r], sig)


def drill_kill_worker(args):
    for flags in (["--dp-size", "2"], ["--tp-size", "2"], ["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention"]):
        fault_drill(args, "kill_worker " + " ".join(flags), flags, kill_rank(1, signal.SIGKILL))


def drill_kill_rank0(args):
    fault_drill(args, "kill_rank0", ["--dp-size", "2"], kill_rank(0, signal.SIGKILL), expect_told=False)


def drill_stop_worker(args):
    fault_drill(args, "stop_worker", ["--dp-size", "2", "--heartbeat-timeout", "2"], kill_rank(1, signal.SIGSTOP))


def drill_stall(args):
    # Rank 1 sleeps inside an all-reduce a little into the run: its heartbeats go on, so the
    # step watchdog is what notices.
    fault_drill(args, "stall", ["--tp-size", "2", "--watchdog-timeout", "3"], lambda server: None,
                mpmd_rank1_env={"AERIE_DRILL_STALL_ALL_REDUCE": "3000"}, told_within=30.0)


def metric(base, name):
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    m = re.search(r"^" + re.escape(name) + r"(?:\{[^}]*\})? ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else None


def drill_disconnects(args):
    server = Server(args, ["--dp-size", "2"], np=2, log="/tmp/aerie-drill-disconnects.log")
    rng = random.Random(5)
    try:
        def one(i):
            stream = rng.random() < 0.5
            body = json.dumps({"input_ids": [rng.randrange(3, 500) for _ in range(rng.randint(1, 40))], "stream": stream,
                               "sampling_params": {"max_new_tokens": rng.randint(20, 300), "temperature": 0, "ignore_eos": True}})
            s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            s.sendall(f"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode())
            if rng.random() < 0.8:  # read a little (or not) and hang up
                try:
                    s.recv(rng.choice([0, 1, 64, 512]) or 1)
                except OSError:
                    pass
            time.sleep(rng.random() * 0.05)
            s.close()

        t0 = time.monotonic()
        threads = []
        for i in range(1000):
            t = threading.Thread(target=one, args=(i,), daemon=True)
            t.start()
            threads.append(t)
            if len([x for x in threads if x.is_alive()]) > 64:
                time.sleep(0.005)
        for t in threads:
            t.join(60)
        deadline = time.monotonic() + 120
        used = running = None
        while time.monotonic() < deadline:
            used, running = metric(server.base, "sglang:num_used_tokens"), metric(server.base, "sglang:num_running_reqs")
            if used == 0 and running == 0:
                break
            time.sleep(0.2)
        hg = urllib.request.urlopen(server.base + "/health_generate", timeout=60).status
        print(f"[disconnects] 1000 clients hung up at random in {time.monotonic() - t0:.1f} s; KV slots in use after: {used}, "
              f"running: {running}; /health_generate {hg}")
        assert used == 0 and running == 0, f"KV pool not back to empty: {used} slots, {running} running"
        assert hg == 200
        assert server.proc.poll() is None, "the server died"
    finally:
        server.close()


def drill_drain(args):
    server = Server(args, ["--shutdown-timeout", "60"], np=0, log="/tmp/aerie-drill-drain.log")
    try:
        inflight = [Client(server.base, i, True, new_tokens=1900) for i in range(4)]
        for c in inflight:
            c.start()
        for c in inflight:
            assert c.first_token.wait(60), "a stream produced no token"
        t0 = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.1)
        late = Client(server.base, 99, False, new_tokens=5)
        late.run()
        late_while_running = all(c.ended_at is None for c in inflight)
        for c in inflight:
            c.join(120)
        rc, _ = server.wait(60)
        print(f"[drain] streams in flight at SIGTERM: {sorted({c.outcome for c in inflight})} "
              f"(last ended {max(c.ended_at for c in inflight) - t0:.2f} s after it); a new request meanwhile: {late.outcome}; "
              f"exit {rc} after {time.monotonic() - t0:.1f} s")
        assert all(c.outcome == "finished" for c in inflight), [c.outcome for c in inflight]
        assert late_while_running and late.outcome == "http 503", (late_while_running, late.outcome)
        assert rc == 0
    finally:
        server.close()


DRILLS = {"kill_worker": drill_kill_worker, "kill_rank0": drill_kill_rank0, "stop_worker": drill_stop_worker, "stall": drill_stall,
          "disconnects": drill_disconnects, "drain": drill_drain}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--server-flags", default="", help="more aerie-serve flags, e.g. '--device cuda'")
    ap.add_argument("--mpirun-flags", default="", help="more mpirun flags, e.g. '-x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH'")
    ap.add_argument("drills", nargs="*", default=list(DRILLS))
    args = ap.parse_args()
    for d in args.drills:
        DRILLS[d](args)
    print("drill_test: all drills passed")


if __name__ == "__main__":
    sys.exit(main())
