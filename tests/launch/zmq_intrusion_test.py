#!/usr/bin/env python3
"""A process outside the launch attacks rank 0's ZeroMQ endpoints while aerie-serve serves
(mpirun -np 2, DP replicas and TP2): it connects PULL sockets to take batches and PUSH
sockets that send forged results, forged heartbeats and garbage, in plain ZeroMQ and with
CURVE keys of its own (tests/transport/zmq_intruder.cpp). CurveZMQ keys handed out over MPI
keep it out: it receives nothing, every request still gets exactly one process's tokens,
/health_generate stays 200, and no fault is raised.

  zmq_intrusion_test.py --serve BIN/aerie-serve --generate BIN/aerie-generate --intruder BIN/zmq_intruder --mpirun MPIRUN
"""
import argparse
import concurrent.futures
import json
import os
import random
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_process import greedy_reference, rank_pids, running_server  # noqa: E402


def listening_ports(pid):
    """The TCP ports process `pid` listens on (from /proc: its socket inodes in LISTEN state)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # LISTEN
                ports.add(int(f[1].split(":")[1], 16))
    return sorted(ports)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    ap.add_argument("--generate", required=True)
    ap.add_argument("--intruder", required=True)
    ap.add_argument("--mpirun", required=True)
    args = ap.parse_args()
    rng = random.Random(3)
    prompts = [[rng.randrange(3, 500) for _ in range(rng.randint(1, 30))] for _ in range(24)]
    want = greedy_reference(args.generate, prompts, 12)
    launcher = [args.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    for layout in (["--dp-size", "2"], ["--tp-size", "2"]):
        log = "/tmp/aerie-zmq-intrusion.log"
        with open(log, "w") as err:
            with running_server(args.serve, ["--load-format", "dummy", "--max-total-tokens", "4096"] + layout, startup_s=120,
                                launcher=launcher, stderr=err) as (url, port):
                # The ranks: children of the processes started with this port whose environment names their rank.
                mpirun = subprocess.run(["pgrep", "-f", "--", f"--port {port}"], capture_output=True, text=True).stdout.split()
                ranks = {}
                for m in mpirun:
                    ranks.update(rank_pids(int(m)))
                zmq_ports = [p for p in listening_ports(ranks[0]) if p != port]
                assert len(zmq_ports) >= 4, f"rank 0 listens on {zmq_ports}: expected its batch and heartbeat endpoints"
                endpoints = [f"tcp://127.0.0.1:{p}" for p in zmq_ports]
                intruder = subprocess.Popen([args.intruder, "6"] + endpoints, stdout=subprocess.PIPE, text=True)

                def one(i):
                    body = json.dumps({"input_ids": prompts[i], "sampling_params": {"max_new_tokens": 12, "temperature": 0,
                                                                                     "ignore_eos": True}}).encode()
                    req = urllib.request.Request(url + "/generate", data=body, headers={"Content-Type": "application/json"})
                    return json.loads(urllib.request.urlopen(req, timeout=120).read())["output_ids"]

                with concurrent.futures.ThreadPoolExecutor(8) as pool:
                    got = list(pool.map(one, range(len(prompts))))
                out, _ = intruder.communicate(timeout=60)
                report = json.loads(out)
                health = urllib.request.urlopen(url + "/health_generate", timeout=60).status
                assert got == want, f"{layout}: outputs changed under attack"
                assert report["received"] == 0, f"{layout}: the intruder received {report['received']} frames"
                assert health == 200
        assert "engine fault" not in open(log).read(), f"{layout}: the intruder raised a fault:\n{open(log).read()[-2000:]}"
        print(f"{' '.join(layout)}: an intruder on rank 0's {len(endpoints)} ZeroMQ endpoints queued {report['queued']} forged frames "
              f"and received {report['received']}; {len(prompts)} requests got one process's tokens; /health_generate {health}")
    print("zmq_intrusion_test: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
