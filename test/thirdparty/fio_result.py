#!/usr/bin/env python3
"""Checks fio librpma server/client pairs and tabulates them (test/thirdparty/fio.sh).

usage: fio_result.py OUT_DIR LIB EXPECTED_BYTES

OUT_DIR/pairs.tsv has one line per pair: name, client exit status, server exit status; the
pair's JSON reports are OUT_DIR/<name>.client.json and OUT_DIR/<name>.server.json. A pair
passed when both fio processes exited 0, every job in both reports has error 0, and the client
moved exactly EXPECTED_BYTES (read + write; fio's group report sums the jobs). Prints a table,
writes it as OUT_DIR/results.tsv (name, lib, read bytes, write bytes, IOPS, MB/s, mean latency
in us, result; bench/fio-compare.sh reads it) and exits 1 if any pair failed.
"""
import json
import os
import sys

FORMAT = "{:<24} {:<6} {:>10} {:>10} {:>9} {:>8} {:>9}  {}"


def load(path):
    """fio's JSON report; fio may print notes into the output file before it."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        return json.loads(text[text.index("{"):])
    except (OSError, ValueError) as e:
        return {"unreadable": str(e)}


def check(out, name, lib, expected, client_rc, server_rc):
    client = load(os.path.join(out, name + ".client.json"))
    server = load(os.path.join(out, name + ".server.json"))
    problems = []
    if client_rc != "0":
        problems.append(f"client exit {client_rc}")
    if server_rc != "0":
        problems.append(f"server exit {server_rc}")
    for side, report in (("client", client), ("server", server)):
        if "unreadable" in report:
            problems.append(f"{side} report unreadable")
        for job in report.get("jobs", []):
            if job.get("error", 0) != 0:
                problems.append(f"{side} error {job['error']}")
    job = (client.get("jobs") or [{}])[0]
    rd, wr = job.get("read", {}), job.get("write", {})
    moved = (rd.get("io_bytes", 0), wr.get("io_bytes", 0))
    if sum(moved) != expected:
        problems.append(f"moved {sum(moved)} B, not {expected}")
    iops = rd.get("iops", 0) + wr.get("iops", 0)
    mbps = (rd.get("bw_bytes", 0) + wr.get("bw_bytes", 0)) / 1e6
    ios = rd.get("total_ios", 0) + wr.get("total_ios", 0)
    lat_ns = 0.0
    if ios:
        lat_ns = sum(d.get("lat_ns", {}).get("mean", 0) * d.get("total_ios", 0) for d in (rd, wr)) / ios
    result = "ok" if not problems else "FAILED: " + "; ".join(problems)
    return [name, lib, moved[0], moved[1], f"{iops:.0f}", f"{mbps:.1f}", f"{lat_ns / 1e3:.1f}", result]


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    out, lib, expected = argv[1], argv[2], int(argv[3])
    with open(os.path.join(out, "pairs.tsv"), encoding="utf-8") as f:
        pairs = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    rows = [check(out, name, lib, expected, crc, src) for name, crc, src in pairs]
    print(FORMAT.format("job", "lib", "read_B", "write_B", "IOPS", "MB/s", "lat_us", "result"))
    with open(os.path.join(out, "results.tsv"), "w", encoding="utf-8") as f:
        for row in rows:
            print(FORMAT.format(*row))
            f.write("\t".join(str(v) for v in row) + "\n")
    failed = sum(1 for row in rows if row[-1] != "ok")
    print(f"fio.sh: {len(rows)} pairs, {failed} failed")
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
