#!/usr/bin/env python3
"""Fault injection driver (docs/reliability.md, "Fault injection").

For each example (C, and C++ unless --c-only) and C test program of a build configured with
ARPMA_FAULT_INJECTION=ON (the asan preset): one run that counts the fault points the program reaches (ARPMA_FAULT_COUNT_FILE),
then one run per point k with ARPMA_FAULT_INJECTION=k. A server/client example is run as a pair,
with the fault in one side at a time and the other side run normally.

Every run must be clean, for each process of it:
  - it exited by itself within --timeout (no hang; a process still running is killed: FAIL),
  - not by a signal (no crash, no abort),
  - with status 0 (it recovered, or the point failed a call whose error it may ignore) or 1 (it
    gave up with an error: the programs print which step failed) -- nothing else,
  - with no sanitizer report on stderr (AddressSanitizer, LeakSanitizer: leaks are checked at
    exit, UndefinedBehaviorSanitizer),
  - with no provider object left at exit (ids, QPs, PDs, CQs, channels, MRs, SRQs: the count
    file lists those created and not destroyed; LeakSanitizer cannot see them, the provider
    keeps them reachable),
  - and the injected process said "arpma fault injection: failing point k", or reached fewer
    than k points (counted, reported as "not reached": the number of points can vary a little
    with timing).

usage: test/fault/run.py --build build/asan [--full] [--max-points N] [--jobs J] [--only REGEX]
                         [--addr A] [--compat-device SILENT NO_ROUTE] [--c-only] [--list]

  --max-points N  at most N points per program side (default: all of them): points
                  1, 1+s, 1+2s, ... and the last, with s = ceil(points / N) (deterministic)
  --jobs J        runs at once (default 8: the processes mostly wait on each other; on 2 cores
                  8 use 1.1 of them, 4 used 0.6)
  --only REGEX    only the programs whose name matches
  --addr A        address to use (default $ARPMA_TEST_ADDR, else $RXE_VM_IP, else 127.0.0.1)
  --quiet-ms MS   how long an example waits to hear from its peer (EXAMPLE_QUIET_MS, default 1500)
  --timeout S     hard limit per process (default 30 s; 120 s with --full: test/compat's
                  programs give a forked server up to 90 s)
  --full          also test/compat's device sections (ADDR SILENT NO_ROUTE: many points, and
                  a failed step there often waits out the program's own timeouts, up to 30 s)
  --compat-device SILENT NO_ROUTE
                  the addresses test/compat's programs get after ADDR with --full (default
                  10.255.255.1 192.0.2.1; in the Soft-RoCE guest ADDR's .254 and 192.0.2.1,
                  as test/compat/run.sh)
  --c-only        the C programs only (without the C++ examples)
  --list          count the points only and print them, one line each

Exit status: 0 every run clean; 1 some run was not; 2 bad usage or missing programs.
"""

import argparse
import concurrent.futures
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SANITIZER_RE = re.compile(
    r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: UndefinedBehaviorSanitizer")
FAULT_RE = re.compile(r"arpma fault injection: failing point (\d+) \((.*)\)")
SANITIZER_EXIT = 86  # ASAN_OPTIONS/UBSAN_OPTIONS exitcode: a report, whatever the program says
CLEAN_EXITS = (0, 1)

PAIRS = [
    ("connection_c", "examples/connection/connection_c_server",
     "examples/connection/connection_c_client"),
    ("write_flush_c", "examples/datapath/write_flush_c_server",
     "examples/datapath/write_flush_c_client"),
    ("atomic_log_c", "examples/datapath/atomic_log_c_server",
     "examples/datapath/atomic_log_c_client"),
    ("ping_pong_c", "examples/datapath/ping_pong_c_server",
     "examples/datapath/ping_pong_c_client"),
    ("srq_c", "examples/datapath/srq_c_server", "examples/datapath/srq_c_client"),
    ("rcq_c", "examples/datapath/rcq_c_server", "examples/datapath/rcq_c_client"),
]
# The C++ examples: the same library under the asynchronous C++ API (co_await and callbacks).
CXX_PAIRS = [
    ("connection_coroutine", "examples/connection/connection_coroutine"),
    ("connection_callback", "examples/connection/connection_callback"),
    ("write_flush_coroutine", "examples/datapath/write_flush_coroutine"),
    ("read_coroutine", "examples/datapath/read_coroutine"),
    ("read_callback", "examples/datapath/read_callback"),
    ("atomic_log_coroutine", "examples/datapath/atomic_log_coroutine"),
    ("ping_pong_coroutine", "examples/datapath/ping_pong_coroutine"),
    ("ping_pong_callback", "examples/datapath/ping_pong_callback"),
    ("many_connections_coroutine", "examples/datapath/many_connections_coroutine"),
    ("srq_coroutine", "examples/datapath/srq_coroutine"),
]
# These listen on a fixed port (test/compat/*.c, PORT): one run at a time.
SERIAL = {"compat_lifecycle_args", "compat_lifecycle", "compat_datapath"}
COMPAT = ["compat_strings", "compat_log", "compat_conn_cfg", "compat_peer_cfg", "compat_device",
          "compat_lifecycle_args", "compat_lifecycle", "compat_datapath"]

port_lock = threading.Lock()
ports_taken = set()


def free_port():
    """A TCP port nothing listens on now, below the ephemeral range, not handed out before."""
    with port_lock:
        for _ in range(200):
            port = random.randint(20000, 32767)
            if port in ports_taken:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("0.0.0.0", port))
                except OSError:
                    continue
            ports_taken.add(port)
            return port
    raise RuntimeError("no free port")


def thread_stacks(pid):
    """Every thread's stack of a hung process (gdb, when installed): what a hang report needs."""
    try:
        out = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt"],
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "(no stacks: %s)" % e
    return "\n".join(line for line in out.stdout.splitlines()
                     if line.startswith(("Thread ", "#")))


class Proc:
    """One process: its output goes to files; wait() bounds it."""

    def __init__(self, argv, env, tmp, name):
        self.name = name
        self.out_path = os.path.join(tmp, name + ".out")
        self.err_path = os.path.join(tmp, name + ".err")
        self.count_path = os.path.join(tmp, name + ".count")
        env = dict(env, ARPMA_FAULT_COUNT_FILE=self.count_path)
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                      env=env, start_new_session=True)
        self.timed_out = False
        self.stacks = ""
        self.rc = None

    def wait(self, deadline):
        try:
            self.rc = self.p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.timed_out = True
            self.stacks = thread_stacks(self.p.pid)
            os.killpg(self.p.pid, signal.SIGKILL)
            self.rc = self.p.wait()
        return self.rc

    def stdout(self):
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def stderr(self):
        with open(self.err_path, errors="replace") as f:
            return f.read()

    def points(self):
        """(count, [names]) from the count file, or (None, []) when it was not written."""
        try:
            with open(self.count_path) as f:
                lines = f.read().splitlines()
        except OSError:
            return None, []
        if not lines:
            return None, []
        names = [line.split(" ", 1)[1] for line in lines[1:]
                 if not line.startswith(("live ", "failed "))]
        return int(lines[0]), names

    def live_objects(self):
        """The provider objects still alive at exit ("live id 1" lines of the count file)."""
        try:
            with open(self.count_path) as f:
                return [line[5:] for line in f.read().splitlines() if line.startswith("live ")]
        except OSError:
            return []

    def verdict(self, injected_k=None):
        """None when clean, else why not."""
        if self.timed_out:
            return "did not exit in time (hang), killed"
        if self.rc < 0:
            return "killed by signal %d" % -self.rc
        err = self.stderr()
        m = SANITIZER_RE.search(err)
        if m or self.rc == SANITIZER_EXIT:
            return "sanitizer report (exit status %d)" % self.rc
        if self.rc not in CLEAN_EXITS:
            return "exit status %d" % self.rc
        live = self.live_objects()
        if live:
            return "provider objects left at exit: " + ", ".join(live)
        return None

    def injected(self):
        """(k, point name) when the injected point failed: the count file says so, or stderr
        (a process that does not get to exit normally writes no count file)."""
        try:
            with open(self.count_path) as f:
                for line in f.read().splitlines():
                    if line.startswith("failed "):
                        _, k, name = line.split(" ", 2)
                        return int(k), name
        except OSError:
            pass
        m = FAULT_RE.search(self.stderr())
        return (int(m.group(1)), m.group(2)) if m else None

    def tail(self, lines=15):
        text = self.stdout().splitlines()[-lines:] + self.stderr().splitlines()[-lines:]
        if self.stacks:
            text += ["stacks when it was killed:"] + self.stacks.splitlines()
        return "\n".join("    %s | %s" % (self.name, line) for line in text)


def report(failures, word="FAILED"):
    for what, res in failures:
        print("\n%s: %s: %s\n%s" % (word, what, "; ".join(res["problems"]), res.get("log", "")))


class Driver:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        base = dict(os.environ)
        for var in ("ARPMA_FAULT_INJECTION", "ARPMA_FAULT_COUNT_FILE"):
            base.pop(var, None)
        base["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0:exitcode=%d" % SANITIZER_EXIT
        base["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1:exitcode=%d" % SANITIZER_EXIT
        base["EXAMPLE_QUIET_MS"] = str(args.quiet_ms)
        if os.environ.get("RXE_VM_IP"):
            base["ARPMA_PROVIDER"] = "verbs"  # in the Soft-RoCE guest: rdma-core on rxe0
        self.env = base
        self.addr = args.addr

    def env_for(self, k):
        env = dict(self.env)
        env["ARPMA_FAULT_INJECTION"] = str(k) if k else "count"
        return env

    # ---- one run ---------------------------------------------------------------------------
    def run_single(self, argv, k):
        with tempfile.TemporaryDirectory(prefix="arpma-fault-") as tmp:
            p = Proc(argv, self.env_for(k), tmp, "prog")
            p.wait(time.monotonic() + self.args.timeout)
            return self.judge({"prog": p}, "prog", k)

    def run_pair(self, server, client, inject, k):
        """inject: 'server' or 'client' (or None for the count run)."""
        with tempfile.TemporaryDirectory(prefix="arpma-fault-") as tmp:
            port = str(free_port())
            senv = self.env_for(k if inject == "server" else 0)
            cenv = self.env_for(k if inject == "client" else 0)
            deadline = time.monotonic() + self.args.timeout
            s = Proc([server, self.addr, port], senv, tmp, "server")
            # the client once the server listens or has given up (it retries meanwhile anyway)
            while time.monotonic() < deadline and s.p.poll() is None:
                if "listening on" in s.stdout():
                    break
                time.sleep(0.02)
            c = Proc([client, self.addr, port], cenv, tmp, "client")
            c.wait(deadline)
            s.wait(deadline)
            return self.judge({"server": s, "client": c}, inject, k)

    def judge(self, procs, inject, k):
        problems = []
        result_warnings = []
        for name, p in procs.items():
            why = p.verdict()
            if why:
                problems.append("%s: %s" % (name, why))
            elif not k and p.rc != 0:
                # Without a fault every program succeeds; a count run that gave up counted the
                # points of a path nobody meant to test (a pair that never connected). An open
                # defect (docs/reliability.md, "Count runs that do not connect"): reported with
                # both sides' output, not yet a failure.
                result_warnings.append("%s: exit status %d with no fault injected" % (name, p.rc))
        # everything read now: the files go with the temporary directory
        result = {"problems": problems, "reached": True, "recovered": False,
                  "points": {name: p.points() for name, p in procs.items()}}
        if k and inject:
            p = procs[inject]
            fired = p.injected()
            if fired is None:
                count, _ = result["points"][inject]
                if count is not None and count < k:
                    result["reached"] = False
                elif not problems:
                    problems.append("%s: point %d reached but no failure reported" % (inject, k))
            else:
                result["point"] = fired[1]
                result["recovered"] = p.rc == 0
        result["warnings"] = result_warnings
        if problems or result_warnings:
            result["log"] = "\n".join(p.tail() for p in procs.values())
        return result

    # ---- programs --------------------------------------------------------------------------
    def programs(self):
        """(name, kind, argv or (server, client)) for every program this build has."""
        b = self.build
        progs = []
        for name, server, client in PAIRS:
            progs.append((name, "pair", (os.path.join(b, server), os.path.join(b, client))))
        if not self.args.c_only:
            for name, prefix in CXX_PAIRS:
                progs.append((name, "pair", (os.path.join(b, prefix + "_server"),
                                             os.path.join(b, prefix + "_client"))))
        progs.append(("conn_req_new_c", "single",
                      [os.path.join(b, "examples/conn_req_new/conn_req_new_c"), self.addr, "7204"]))
        progs.append(("capi_args", "single", [os.path.join(b, "test/capi_args")]))
        dev = [self.addr] + self.args.compat_device if self.args.full else []
        for name in COMPAT:
            path = os.path.join(b, "test/compat/arpma", name)
            if os.path.exists(path):
                progs.append((name, "single", [path] + dev))
        if self.args.only:
            progs = [p for p in progs if re.search(self.args.only, p[0])]
        missing = []
        for _, kind, what in progs:
            for path in (what if kind == "pair" else what[:1]):
                if not os.access(path, os.X_OK):
                    missing.append(path)
        return progs, missing

    def sides(self, name, kind, what):
        """[(label, runner(k))] per side to inject."""
        if kind == "single":
            return [(name, lambda k, w=what: self.run_single(w, k), "prog")]
        server, client = what
        return [(name + ":server", lambda k: self.run_pair(server, client, "server", k), "server"),
                (name + ":client", lambda k: self.run_pair(server, client, "client", k), "client")]

    @staticmethod
    def timed(runner, k):
        t0 = time.monotonic()
        res = runner(k)
        res["seconds"] = time.monotonic() - t0
        return res

    def pick(self, n):
        if n == 0:
            return []
        if not self.args.max_points or n <= self.args.max_points:
            return list(range(1, n + 1))
        stride = math.ceil(n / self.args.max_points)
        return sorted(set(range(1, n + 1, stride)) | {n})

    def main(self):
        progs, missing = self.programs()
        if missing:
            print("fault: missing programs (build them first):\n  " + "\n  ".join(missing))
            return 2
        if not progs:
            print("fault: no program selected")
            return 2
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.args.jobs)
        serial_pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        t_start = time.monotonic()
        # count runs: every side of every program, in parallel
        count_runs = {}
        for name, kind, what in progs:
            runner = self.sides(name, kind, what)[0][1]
            count_runs[name] = pool.submit(runner, 0)
        plan = []
        failures = []
        warnings = []
        for name, kind, what in progs:
            res = count_runs[name].result()
            if res["problems"]:
                failures.append((name + " (count run)", res))
            elif res["warnings"]:
                warnings.append((name + " (count run)", dict(res, problems=res["warnings"])))
            for label, runner, side in self.sides(name, kind, what):
                count, names = res["points"][side]
                count = count or 0
                points = self.pick(count)
                plan.append((label, runner, count, points, name in SERIAL))
                print("fault: %-28s %4d points, %4d runs" % (label, count, len(points)),
                      flush=True)
                if self.args.list:
                    for i, point in enumerate(names, 1):
                        print("    %3d %s" % (i, point))
        if self.args.list:
            report(warnings, "WARNING")
            report(failures)
            return 1 if failures else 0
        totals = {"runs": 0, "not_reached": 0, "recovered": 0}
        # Every run queued at once: the pool stays full across programs (a barrier per program
        # left most workers idle while its last runs waited out their peers' quiet time).
        queued = [(label, [(k, (serial_pool if serial else pool).submit(self.timed, runner, k))
                           for k in points]) for label, runner, count, points, serial in plan]
        for label, futures in queued:
            points = [k for k, _ in futures]
            busy = 0.0
            bad = 0
            recovered = []
            for k, fut in futures:
                res = fut.result()
                busy += res["seconds"]
                totals["runs"] += 1
                if not res["reached"]:
                    totals["not_reached"] += 1
                if res["recovered"]:
                    totals["recovered"] += 1
                    recovered.append("%d:%s" % (k, res.get("point", "?")))
                if res["problems"]:
                    bad += 1
                    failures.append(("%s point %d (%s)" % (label, k, res.get("point", "?")), res))
            print("fault: %-28s %4d runs, %d not clean, %d recovered (exit 0)%s, %.1f s of runs" %
                  (label, len(points), bad, len(recovered),
                   ": " + " ".join(recovered) if recovered and self.args.verbose else "",
                   busy), flush=True)
        pool.shutdown()
        serial_pool.shutdown()
        elapsed = time.monotonic() - t_start
        report(warnings, "WARNING")
        report(failures)
        if warnings:
            print("\nfault: %d count runs did not succeed (WARNING above): their points are those "
                  "of a failure path" % len(warnings))
        print("\nfault: %d programs, %d injection runs (+%d count runs), %d not clean, "
              "%d points not reached, %d recovered, %.1f s" %
              (len(progs), totals["runs"], len(progs), len(failures), totals["not_reached"],
               totals["recovered"], elapsed))
        return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("usage: ")[1].split("\n\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--max-points", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--only")
    ap.add_argument("--addr", default=os.environ.get("ARPMA_TEST_ADDR",
                                                     os.environ.get("RXE_VM_IP", "127.0.0.1")))
    ap.add_argument("--quiet-ms", type=int, default=1500)
    ap.add_argument("--timeout", type=float)
    ap.add_argument("--compat-device", nargs=2, metavar=("SILENT", "NO_ROUTE"))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--c-only", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.timeout is None:
        args.timeout = 120.0 if args.full else 30.0
    if not args.compat_device:
        silent = "10.255.255.1"
        if os.environ.get("RXE_VM_IP"):  # in the Soft-RoCE guest: as test/compat/run.sh
            prefix, last = args.addr.rsplit(".", 1)
            silent = "%s.%d" % (prefix, 253 if last == "254" else 254)
        args.compat_device = [silent, "192.0.2.1"]
    if not os.path.isdir(args.build):
        print("fault: no build directory %s" % args.build)
        return 2
    return Driver(args).main()


if __name__ == "__main__":
    sys.exit(main())
