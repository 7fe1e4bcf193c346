#!/usr/bin/env bash
# Issue 6's benchmark, inside the Soft-RoCE guest: the same librpma program
# (bench/librpma_compare.c, built against Debian's librpma) on librpma and on
# arpma's librpma.so.0 drop-in, plus arpma's connections in flight
# (bench/conn_setup_bench) and rdma-core's cmtime (the baseline for connections in flight);
# prints the figures and the ratios.
#
# Rounds alternate librpma and arpma (ROUNDS, default 5) so that a slow spell
# of the emulated CPU hits both; each line is one round, the last lines the
# medians of the per-round ratios. Every connection-rate line also says how
# busy the guest's CPUs were (from /proc/stat), which tells a run that is
# bound by CPU from one that waits.
#
#   test/vm/run-in-rxe-vm.sh -- bench/rxe-compare.sh build/default
set -euo pipefail
build=$(cd -- "${1:?usage: $0 BUILD_DIR}" && pwd -P)
addr=${RXE_VM_IP:?run me inside the guest: test/vm/run-in-rxe-vm.sh -- $0 BUILD_DIR}
export ARPMA_PROVIDER=verbs ARPMA_TEST_ADDR=$addr
prog=$build/bench/librpma_compare
n_lat=${N_LAT:-2000}
n_conn=${N_CONN:-100}
rounds=${ROUNDS:-5}
port=7310

# shellcheck source=bench/guest_stats.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/guest_stats.sh"
# LIBDIR WHAT N: one run of the librpma program (LIBDIR empty: Debian's librpma)
run() {
  port=$((port + 1))
  if [[ -n $1 ]]; then
    LD_LIBRARY_PATH=$1 timeout 300 "$prog" "$addr" "$port" "$2" "$3"
  else
    timeout 300 "$prog" "$addr" "$port" "$2" "$3"
  fi
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
# rdma-core's cmtime with N_CONN connections (it takes each step for all of them at once, on one
# thread): connections/s over the sum of its steps' totals. Its server never exits: killed.
cmtime_rate() {
  port=$((port + 1))
  timeout 120 cmtime -b "$addr" -p "$port" -c "$n_conn" >/dev/null 2>&1 &
  local server=$! out
  sleep 1
  out=$(timeout 120 cmtime -s "$addr" -p "$port" -c "$n_conn" 2>&1)
  kill "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  awk -v n="$n_conn" -F: 'NF == 2 && $1 ~ /^[a-z ]+$/ { split($2, v, " "); ms += v[1] }
    END { if (ms > 0) printf "%.1f", n / (ms / 1000); else print "-" }' <<<"$out"
}

echo "guest: $(nproc) CPUs (emulated), $rounds rounds, $n_lat writes and $n_conn connections per run"
lat_ratios=()
con_ratios=()
seq_ratios=()
cm_ratios=()
for ((r = 1; r <= rounds; ++r)); do
  lat_l=$(run "" latency "$n_lat" | awk '{ print $3 }')
  lat_a=$(run "$build/librpma-abi" latency "$n_lat" | awk '{ print $3 }')
  read -r b0 i0 < <(cpu)
  con_l=$(run "" connect "$n_conn" | awk '{ print $2 }')
  busy_l=$(busy_since "$b0" "$i0")
  read -r b0 i0 < <(cpu)
  con_a=$(run "$build/librpma-abi" connect "$n_conn" | awk '{ print $2 }')
  busy_a=$(busy_since "$b0" "$i0")
  read -r b0 i0 < <(cpu)
  port=$((port + 1))
  inflight=$(timeout 300 "$build/bench/conn_setup_bench" "$addr" "$port" "$n_conn" 64 | awk '{ print $2 }')
  busy_i=$(busy_since "$b0" "$i0")
  read -r b0 i0 < <(cpu)
  port=$((port + 1))
  inflight_s=$(timeout 300 "$build/bench/conn_setup_bench" "$addr" "$port" "$n_conn" 64 --channel shared |
    awk '{ print $2 }')
  busy_s=$(busy_since "$b0" "$i0")
  read -r b0 i0 < <(cpu)
  cm=$(cmtime_rate)
  busy_c=$(busy_since "$b0" "$i0")
  lat_ratios+=("$(ratio "$lat_a" "$lat_l")")
  con_ratios+=("$(ratio "$inflight" "$con_l")")
  seq_ratios+=("$(ratio "$con_a" "$con_l")")
  [[ $cm != - ]] && cm_ratios+=("$(ratio "$inflight" "$cm")")
  echo "round $r: 64 B write median us: librpma $lat_l, arpma C API $lat_a (ratio ${lat_ratios[-1]});" \
    "connections/s: librpma sequential $con_l (CPU ${busy_l}%), arpma C API sequential $con_a" \
    "(CPU ${busy_a}%; ratio ${seq_ratios[-1]}), arpma 64 in flight $inflight (CPU ${busy_i}%; ratio to librpma ${con_ratios[-1]})," \
    "the same on shared completion channels $inflight_s (CPU ${busy_s}%; ratio $(ratio "$inflight_s" "$con_l")), cmtime -c $n_conn $cm (CPU ${busy_c}%)"
done
echo "median latency ratio (arpma C API / librpma): $(printf '%s\n' "${lat_ratios[@]}" | median)  target 0.95-1.05"
echo "median connection-rate ratio (arpma C API sequential / librpma sequential): $(printf '%s\n' "${seq_ratios[@]}" | median)  target >= 1.0"
echo "median connection-rate ratio (arpma 64 in flight / librpma sequential): $(printf '%s\n' "${con_ratios[@]}" | median)  target >= 10"
if [[ ${#cm_ratios[@]} -gt 0 ]]; then
  echo "median connection-rate ratio (arpma 64 in flight / cmtime): $(printf '%s\n' "${cm_ratios[@]}" | median)  target >= 0.9"
fi
echo "in flight on this guest (CPU% = guest CPU busy during the run):"
for k in 1 4 16 64; do
  read -r b0 i0 < <(cpu)
  port=$((port + 1))
  rate=$(timeout 300 "$build/bench/conn_setup_bench" "$addr" "$port" "$n_conn" "$k" | awk '{ print $2 }')
  echo "  $k in flight: $rate connections/s (CPU $(busy_since "$b0" "$i0")%)"
done
echo "the process's own CPU time (user / sys), ${n_conn} connections:"
TIMEFORMAT='%U s user, %S s sys, %R s wall'
for what in "librpma sequential" "arpma 64 in flight"; do
  port=$((port + 1))
  if [[ $what == librpma* ]]; then
    t=$({ time timeout 300 "$prog" "$addr" "$port" connect "$n_conn" >/dev/null; } 2>&1)
  else
    t=$({ time timeout 300 "$build/bench/conn_setup_bench" "$addr" "$port" "$n_conn" 64 >/dev/null; } 2>&1)
  fi
  echo "  $what: $t"
done
