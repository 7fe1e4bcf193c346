#!/usr/bin/env python3
"""arpma-perf end to end on loopback: run_perf.py <arpma-perf> <case>.

Starts a server (port 0: it prints the port it got) and a client as separate processes,
checks exit statuses, what they print, and the client's JSON: well formed, every field
there, consistent (min <= median <= p99 <= p99.9 <= max, the operations counted are the
ones asked for, GB/s = size * ops/s / 1e9). No timing is asserted. Every wait is bounded.
"""
import json
import math
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

TOOL = sys.argv[1]
LIMIT = 40  # seconds any one process may take


def fail(msg):
    print("FAILED: " + msg)
    sys.exit(1)


class Server:
    def __init__(self, *extra):
        self.proc = subprocess.Popen([TOOL, "server", "--addr", "127.0.0.1", "--port", "0", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self._line()
        m = re.search(r"listening on 127\.0\.0\.1:(\d+), (\w+) provider", line)
        if not m:
            self.kill()
            fail("server's first line: %r" % line)
        self.port = m.group(1)
        print("server: " + line.strip())

    def _line(self):
        ready, _, _ = select.select([self.proc.stdout], [], [], LIMIT)
        return self.proc.stdout.readline() if ready else ""

    def wait(self, expect_rc=0):
        try:
            out, err = self.proc.communicate(timeout=LIMIT)
        except subprocess.TimeoutExpired:
            self.kill()
            fail("the server did not exit")
        print("server stdout:\n" + out + "server stderr:\n" + err)
        if self.proc.returncode != expect_rc:
            fail("server exit status %d, expected %d" % (self.proc.returncode, expect_rc))
        return out

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def client(port, *args, expect_rc=0):
    cmd = [TOOL, "client", "--addr", "127.0.0.1", "--port", port, *args]
    print("$ " + " ".join(cmd))
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=LIMIT)
    except subprocess.TimeoutExpired:
        fail("the client did not exit")
    print(r.stdout + r.stderr)
    if r.returncode != expect_rc:
        fail("client exit status %d, expected %d" % (r.returncode, expect_rc))
    return r


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)


def check_result(res, params, complete):
    lat = res["latency_ns"]
    order = [lat["min"], lat["median"], lat["p99"], lat["p99_9"], lat["max"]]
    if any(not isinstance(v, int) for v in order) or order != sorted(order) or order[0] <= 0:
        fail("latencies out of order: %r" % lat)
    if not lat["min"] <= lat["mean"] <= lat["max"]:
        fail("mean outside [min, max]: %r" % lat)
    if res["ops"] <= 0 or res["elapsed_s"] <= 0:
        fail("nothing measured: %r" % res)
    if not close(res["ops_per_s"], res["ops"] / res["elapsed_s"]):
        fail("ops/s is not ops / elapsed: %r" % res)
    if not close(res["gb_per_s"], res["size"] * res["ops_per_s"] / 1e9):
        fail("GB/s is not size * ops/s / 1e9: %r" % res)
    if res["complete"] != complete:
        fail("complete is %r, expected %r" % (res["complete"], complete))
    if complete and params["iters"] is not None and res["ops"] != params["iters"] * params["conns"]:
        fail("%d ops counted, %d asked for" % (res["ops"], params["iters"] * params["conns"]))


def check_json(path, expect, complete=True, interrupted=False):
    with open(path) as f:
        text = f.read()
    try:
        doc = json.loads(text)
    except ValueError as e:
        fail("not JSON (%s): %s" % (e, text))
    if doc["tool"] != "arpma-perf" or not doc["version"] or doc["provider"] != "soft":
        fail("header fields: %r" % doc)
    params = doc["parameters"]
    for key, value in expect.items():
        if params[key] != value:
            fail("parameters.%s is %r, expected %r" % (key, params[key], value))
    if doc["interrupted"] != interrupted or doc["error"] is not None:
        fail("interrupted/error: %r %r" % (doc["interrupted"], doc["error"]))
    results = doc["results"]
    if complete and [r["size"] for r in results] != params["sizes"]:
        fail("sizes measured %r, asked %r" % ([r["size"] for r in results], params["sizes"]))
    for i, res in enumerate(results):
        check_result(res, params, complete or i + 1 < len(results))
    return doc


def run_case(args, expect):
    server = Server("--once")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        r = client(server.port, *args, "--json", path)
        check_json(path, expect)
    server.wait(0)
    if "p99.9" not in r.stdout or "soft provider" not in r.stdout:
        fail("no summary table")


def bad_args():
    cases = [["client", "--size", "0"], ["client", "--bogus"], ["client", "--op", "atomic_write",
             "--size", "16"], ["client", "--test", "bw", "--qd", "0"], ["client", "--qd", "4"],
             ["server", "--op", "write"], ["client", "--iters", "1", "--duration", "1"], [],
             ["client", "--size", "17M"], ["client", "--json"]]
    for args in cases:
        r = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=LIMIT)
        if r.returncode != 2 or "usage: arpma-perf" not in r.stderr or r.stdout:
            fail("%r: status %d, stdout %r, stderr %r" % (args, r.returncode, r.stdout, r.stderr))
        print("%r -> 2: %s" % (args, r.stderr.splitlines()[0]))
    r = subprocess.run([TOOL, "--help"], capture_output=True, text=True, timeout=LIMIT)
    if r.returncode != 0 or "usage: arpma-perf" not in r.stdout:
        fail("--help: %d %r" % (r.returncode, r.stdout))
    # No server: the client retries for 5 s, then says why and exits 1.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        r = client("9", "--iters", "10", "--json", path, expect_rc=1)
        with open(path) as f:
            doc = json.load(f)
        if "connecting" not in doc["error"] or doc["results"]:
            fail("error in the JSON: %r" % doc)


def sigint():
    server = Server("--once")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        cmd = [TOOL, "client", "--port", server.port, "--test", "bw", "--qd", "4", "--size",
               "64,4096", "--duration", "30", "--json", path]
        print("$ " + " ".join(cmd) + "  (SIGINT after 1.5 s)")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=LIMIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail("the client did not stop on SIGINT")
        print(out + err)
        if proc.returncode != 130:
            fail("exit status %d after SIGINT, expected 130" % proc.returncode)
        if "(cut short)" not in out or "interrupted by SIGINT: 1 of 2 sizes" not in out:
            fail("no summary of the run so far")
        doc = check_json(path, {"duration_s": 30}, complete=False, interrupted=True)
        if len(doc["results"]) != 1 or doc["results"][0]["complete"]:
            fail("expected one cut-short result: %r" % doc["results"])
    server.wait(0)


def servers():
    # --clients 2: two runs, then exit 0; the second one with two connections.
    server = Server("--clients", "2")
    client(server.port, "--iters", "20")
    client(server.port, "--iters", "20", "--conns", "2", "--test", "bw", "--qd", "2")
    out = server.wait(0)
    if out.count("run done") != 2:
        fail("the server did not count two runs")
    # Without a limit: serves until SIGTERM, then exits 0.
    server = Server()
    client(server.port, "--iters", "20")
    server.proc.send_signal(signal.SIGTERM)
    server.wait(0)


CASES = {
    "lat_write": (["--test", "lat", "--op", "write", "--size", "64,4096", "--iters", "300"],
                  {"test": "lat", "op": "write", "iters": 300, "conns": 1, "qd": 1}),
    "bw_write": (["--test", "bw", "--op", "write", "--size", "65536", "--qd", "8", "--iters",
                  "300"], {"test": "bw", "op": "write", "qd": 8, "sizes": [65536]}),
    "lat_send": (["--test", "lat", "--op", "send", "--size", "8,1024", "--iters", "200",
                  "--mode", "busy-poll"], {"op": "send", "mode": "busy-poll"}),
    "bw_send": (["--test", "bw", "--op", "send", "--size", "4k", "--qd", "16", "--iters", "500"],
                {"op": "send", "test": "bw"}),
    "bw_read": (["--test", "bw", "--op", "read", "--size", "64,65536", "--qd", "4", "--iters",
                 "200", "--warmup", "0"], {"op": "read", "warmup": 0}),
    "lat_atomic_write": (["--op", "atomic_write", "--iters", "200"],
                         {"op": "atomic_write", "sizes": [8]}),
    "bw_flush": (["--test", "bw", "--op", "flush", "--size", "256", "--qd", "4", "--iters", "200"],
                 {"op": "flush"}),
    "sweep_conns": (["--test", "bw", "--size", "64:1k", "--conns", "3", "--qd", "4", "--iters",
                     "100"], {"conns": 3, "sizes": [64, 128, 256, 512, 1024]}),
}

if __name__ == "__main__":
    case = sys.argv[2]
    if case in CASES:
        run_case(*CASES[case])
    elif case == "bad_args":
        bad_args()
    elif case == "sigint":
        sigint()
    elif case == "server_once":
        servers()
    else:
        fail("unknown case " + case)
    print("PASSED")
