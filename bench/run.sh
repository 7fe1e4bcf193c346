#!/usr/bin/env bash
# Runs the comparison benchmarks of bench/ with their baselines (measured in
# the same run), writes bench/results/*.json and draws bench/results/*.png
# with gnuplot. Soft provider on loopback; nothing leaves the machine.
#
#   bench/run.sh [--quick] [--build DIR] [--out DIR]
#
# --quick: ~1-2 min on a 2-core machine (fewer rounds, 1,000 connections in
# the scale run); full: <= ~10 min (10,000 connections). Build first:
#   cmake --preset default && cmake --build --preset default
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode=full
build="${root}/build/default"
out="${root}/bench/results"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) mode=quick ;;
    --build) build="$(cd "$2" && pwd)"; shift ;;
    --out) out="$2"; shift ;;
    *) echo "usage: $0 [--quick] [--build DIR] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
bin="${build}/bench"
for b in hotpath_bench soft_datapath_bench datapath_bench conn_setup_bench scale_bench; do
  if [[ ! -x "${bin}/${b}" ]]; then
    echo "run.sh: ${bin}/${b} missing; build first: cmake --preset default && cmake --build --preset default" >&2
    exit 1
  fi
done
for tool in python3 gnuplot; do
  command -v "${tool}" >/dev/null || { echo "run.sh: ${tool} not found (scripts/install-deps.sh)" >&2; exit 1; }
done
mkdir -p "${out}"
export ARPMA_PROVIDER=soft

quick_flag=()
if [[ "${mode}" == quick ]]; then
  quick_flag=(--quick)
  gbench_min_time=0.05
  setup_n=400
  setup_k=(1 4 16 64)
  setup_repeats=1
  scale_n=1000
else
  gbench_min_time=1
  setup_n=3000
  setup_k=(1 2 4 8 16 32 64 128 256)
  setup_repeats=3
  scale_n=10000
fi

started=$(date +%s)
step() { printf '\n== %s (%ds)\n' "$1" $(($(date +%s) - started)); }

# Every step has a time limit, so a stuck run ends instead of hanging.
run() {
  local limit=$1
  shift
  timeout --kill-after=10 "${limit}" "$@"
}

python3 - "${out}/machine.json" "${mode}" "${root}" <<'PY'
import json, os, platform, subprocess, sys, time
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
try:
    commit = subprocess.run(["git", "-C", sys.argv[3], "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
except OSError:
    commit = ""
json.dump({"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "mode": sys.argv[2],
           "nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
           "loadavg_start": os.getloadavg(), "commit": commit},
          open(sys.argv[1], "w"), indent=2)
PY

step "hotpath_bench: post, completion dispatch, cm event demux (Google Benchmark)"
run 300 "${bin}/hotpath_bench" --benchmark_min_time="${gbench_min_time}" \
  --benchmark_out="${out}/hotpath.json" --benchmark_out_format=json

step "soft_datapath_bench: soft provider vs raw TCP, with the message-size sweep"
run 300 "${bin}/soft_datapath_bench" "${quick_flag[@]}" --sweep --json "${out}/soft_datapath.json"

step "datapath_bench: co_await vs C path, fd and busy-poll"
run 300 "${bin}/datapath_bench" "${quick_flag[@]}" --json "${out}/datapath.json"

step "conn_setup_bench: connection setup rate vs requests in flight (${setup_n} each, ${setup_repeats}x; the median is plotted)"
# One JSON per run in a scratch folder; plot_data.py keeps the medians and
# every run's figure in conn_setup.json.
setup_runs="$(mktemp -d)"
trap 'rm -rf "${setup_runs}"' EXIT
for r in $(seq 1 "${setup_repeats}"); do
  for k in "${setup_k[@]}"; do
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    run 180 "${bin}/conn_setup_bench" 127.0.0.1 "${port}" "${setup_n}" "${k}" \
      --json "${setup_runs}/conn_setup_k${k}_r${r}.json"
  done
done

step "scale_bench: ${scale_n} connections on one io_context"
run 420 "${bin}/scale_bench" --connections "${scale_n}" --json "${out}/scale.json"

step "plots"
python3 "${root}/bench/plot_data.py" "${out}" "${setup_runs}"
gnuplot -e "dir='${out}'" "${root}/bench/plot.gp"
ls -l "${out}"/*.png
python3 - "${out}/machine.json" <<'PY'
import json, os, sys
m = json.load(open(sys.argv[1]))
m["loadavg_end"] = os.getloadavg()
json.dump(m, open(sys.argv[1], "w"), indent=2)
PY
printf '\nrun.sh: %s run done in %ds; results in %s\n' "${mode}" $(($(date +%s) - started)) "${out}"
