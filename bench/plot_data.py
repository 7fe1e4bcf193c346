#!/usr/bin/env python3
"""Turns bench/run.sh's JSON results into gnuplot data files and summary.md.

    plot_data.py RESULTS_DIR [SETUP_RUNS_DIR]

Reads soft_datapath.json (message-size sweep), conn_setup_k*.json (one per
number in flight and repeat, in SETUP_RUNS_DIR, default RESULTS_DIR; merged
into conn_setup.json), datapath.json, scale.json,
hotpath.json and machine.json when present. Standard library only.
"""
import glob
import json
import os
import re
import statistics
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def human(size):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size // scale} {unit}"
    return f"{size} B"


def main():
    out = sys.argv[1]
    lines = []
    machine = load(os.path.join(out, "machine.json"))
    if machine:
        lines.append(f"Machine: {machine['nproc']} CPUs, {machine['cpu']}, kernel {machine['kernel']}; "
                     f"load average {machine['loadavg_start'][0]:.2f} at start"
                     + (f", {machine['loadavg_end'][0]:.2f} at end" if "loadavg_end" in machine else "")
                     + f"; {machine['mode']} run, {machine['date']}, commit {machine['commit']}.")
        lines.append("")

    soft = load(os.path.join(out, "soft_datapath.json"))
    if soft:
        with open(os.path.join(out, "sweep.dat"), "w") as dat:
            dat.write("# size tcp_latency_us soft_latency_us tcp_MBps soft_MBps\n")
            for p in soft["sweep"]:
                dat.write(f"{p['size']} {p['tcp_latency_us']} {p['soft_latency_us']} "
                          f"{p['tcp_mbps']} {p['soft_mbps']}\n")
        r, b = soft["rtt_64b_us"], soft["write_bw_64k_qd16_mbps"]
        lines += ["| soft_datapath_bench | raw TCP | soft | ratio |", "|---|---|---|---|",
                  f"| 64 B send/recv round trip | {r['tcp']:.1f} µs | {r['soft']:.1f} µs | {r['ratio']:.2f} |",
                  f"| 64 KiB write bandwidth, QD 16 | {b['tcp']:.0f} MB/s | {b['soft']:.0f} MB/s | {b['ratio']:.2f} |",
                  ""]
        if soft["sweep"]:
            lines += ["| size | write latency TCP | soft | ratio | bandwidth TCP | soft | ratio |",
                      "|---|---|---|---|---|---|---|"]
            for p in soft["sweep"]:
                lines.append(f"| {human(p['size'])} | {p['tcp_latency_us']:.1f} µs | {p['soft_latency_us']:.1f} µs | "
                             f"{p['soft_latency_us'] / p['tcp_latency_us']:.2f} | {p['tcp_mbps']:.0f} MB/s | "
                             f"{p['soft_mbps']:.0f} MB/s | {p['soft_mbps'] / p['tcp_mbps']:.2f} |")
            lines.append("")

    runs = []
    runs_dir = sys.argv[2] if len(sys.argv) > 2 else out
    for path in glob.glob(os.path.join(runs_dir, "conn_setup_k*.json")):
        d = load(path)
        if d:
            runs.append(d)
    by_k = {}
    for d in runs:
        by_k.setdefault(d["in_flight"], []).append(d["connect_per_s"])
    setups = [{"in_flight": k, "connect_per_s": statistics.median(v), "runs": sorted(v)}
              for k, v in sorted(by_k.items())]
    if setups:
        with open(os.path.join(out, "conn_setup.json"), "w") as f:
            json.dump({"bench": "conn_setup_bench", "connections_per_run": runs[0]["connections"],
                       "median_per_in_flight": setups}, f, indent=2)
        with open(os.path.join(out, "conn_setup.dat"), "w") as dat:
            dat.write("# in_flight median_connect_per_s min max\n")
            for d in setups:
                dat.write(f"{d['in_flight']} {d['connect_per_s']} {d['runs'][0]} {d['runs'][-1]}\n")
        lines += ["| conn_setup_bench: in flight | " + " | ".join(str(d["in_flight"]) for d in setups) + " |",
                  "|---" * (len(setups) + 1) + "|",
                  f"| connections/s (median of {len(setups[0]['runs'])}) | "
                  + " | ".join(f"{d['connect_per_s']:.0f}" for d in setups) + " |", ""]

    dp = load(os.path.join(out, "datapath.json"))
    if dp:
        lines += ["| datapath_bench (64 B write round trip) | C path median / p99 | co_await median / p99 | ratio |",
                  "|---|---|---|---|"]
        for m in dp["modes"]:
            lines.append(f"| {m['mode']} | {m['c_median_us']:.2f} / {m['c_p99_us']:.2f} µs | "
                         f"{m['coawait_median_us']:.2f} / {m['coawait_p99_us']:.2f} µs | {m['ratio']:.2f} |")
        lines.append("")

    hp = load(os.path.join(out, "hotpath.json"))
    if hp:
        lines += ["| hotpath_bench | per operation |", "|---|---|"]
        for b in hp["benchmarks"]:
            per = next((v for k, v in b.items() if re.match(r"per_\w+_ns$", k)), None)
            if per is not None:
                lines.append(f"| {b['name'].removesuffix('/manual_time').removesuffix('/iterations:2000')} | {per:.0f} ns |")
        lines.append("")

    sc = load(os.path.join(out, "scale.json"))
    if sc:
        lines += ["| scale_bench | |", "|---|---|",
                  f"| connections open at once (asked) | {sc['connections']} ({sc['connections_asked']}) |",
                  f"| setup, {sc['in_flight']} in flight | {sc['setup_s']:.2f} s ({sc['connections_per_s']:.0f}/s), {sc['failed']} failed |",
                  f"| fds added | {sc['fds_delta']}: {sc['socket_fds_delta']} TCP sockets (soft transport), "
                  f"{sc['arpma_channel_fds_delta']} arpma channel eventfds, {sc['other_fds_delta']} other |",
                  f"| RSS per connection | {sc['rss_per_connection_kib']:.1f} KiB ({sc['rss_delta_kib']} KiB in all) |",
                  f"| completion channels | {'one per side (arpma::completion_channel)' if sc.get('shared_channel', False) else 'one per connection'} |",
                  f"| traffic: one send on each at once | {sc.get('sends_completed', 0)} completed, {sc.get('sends_failed', 0)} failed, "
                  f"{sc.get('server_received', 0)} received, {sc.get('traffic_s', 0):.2f} s |",
                  f"| teardown | {sc['teardown_s']:.2f} s |", ""]

    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
