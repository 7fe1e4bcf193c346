#!/usr/bin/env bash
# Issue 17's budget: syscalls, context switches and CPU time per operation, for arpma-perf
# (64 B, one operation in flight: write, send ping-pong, read; busy-poll and fd mode) and for
# the tool an RDMA engineer would use instead, on the same transport in the same run:
#   soft provider (host, loopback): sockperf TCP ping-pong, 64 B;
#   verbs (rdma-core, e.g. inside the Soft-RoCE guest): perftest's ib_write_lat, ib_send_lat,
#   ib_read_lat (polling) and ib_send_lat -e (events).
#
# Per-operation figures are differential: each program runs twice, with a small and a large
# count (perftest, arpma-perf: --iters; sockperf, which runs for a time: two durations and the
# message counts it reports), and (large - small) / (operations(large) - operations(small))
# leaves out connection setup and teardown. Syscalls come from `strace -f -c` (every thread);
# context switches and CPU time from `perf stat` in separate runs without strace (which would
# distort both). Client and server are reported apart. Bounded: every run has a timeout.
#
#   bench/syscalls.sh [BUILD_DIR]                      # soft provider on 127.0.0.1
#   test/vm/run-in-rxe-vm.sh -- bench/syscalls.sh build/default   # verbs on rxe0 ($RXE_VM_IP)
#
# Environment: SMALL, LARGE (counts, default 2000 and 6000), OPS (default "write send read"),
# MODES (default "busy-poll coroutine"), TOP (syscall names shown per row, default 4).
set -euo pipefail
build=$(cd -- "${1:-build/default}" && pwd -P)
perf_tool=$build/tools/arpma-perf/arpma-perf
[[ -x $perf_tool ]] || {
  echo "syscalls.sh: $perf_tool not built" >&2
  exit 2
}
for tool in strace perf; do
  command -v "$tool" >/dev/null || {
    echo "syscalls.sh: $tool is missing (scripts/install-deps.sh installs it)" >&2
    exit 2
  }
done
if [[ -n ${RXE_VM_IP:-} ]]; then
  provider=verbs addr=$RXE_VM_IP
  perftest_dev=(-d "${RXE_VM_DEV:-rxe0}" -x "${RXE_VM_GID_INDEX:-1}")
else
  provider=${ARPMA_PROVIDER:-soft} addr=${ARPMA_TEST_ADDR:-127.0.0.1}
  perftest_dev=()
fi
export ARPMA_PROVIDER=$provider
small=${SMALL:-2000}
large=${LARGE:-6000}
ops=${OPS:-write send read}
modes=${MODES:-busy-poll coroutine}
top=${TOP:-4}
work=$(mktemp -d "${TMPDIR:-/tmp}/arpma-syscalls.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo 19300 >"$work/port"
# The runners run in command substitutions (subshells): the port counter lives in a file.
next_port() {
  port=$(($(cat "$work/port") + 1))
  echo "$port" >"$work/port"
}

# ---- measuring ------------------------------------------------------------------------------

# strace -c's table → "name calls" lines (the total as "total").
strace_calls() { awk '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ { print $NF, $4 }' "$1"; }
# perf stat -x, → "task-clock-ms context-switches"
perf_figures() {
  awk -F, '$3 == "task-clock" { t = $1 } $3 == "context-switches" { c = $1 }
           END { print t + 0, c + 0 }' "$1"
}

# Waits (5 s at most) for a TCP listener on $port, where there is one to see (sockperf, the
# soft provider); a fixed pause for rdma_cm's port space.
wait_listening() {
  if [[ $1 == tcp ]]; then
    for _ in $(seq 50); do
      [[ -n $(ss -ltnH "sport = :$port" 2>/dev/null) ]] && return 0
      sleep 0.1
    done
    echo "syscalls.sh: nothing listens on port $port" >&2
    return 1
  fi
  sleep 1
}
transport() { if [[ $provider == soft ]]; then echo tcp; else echo rdma_cm; fi; }

# WRAP TAG SIDE CMD...: runs CMD under the wrapper (strace or perf), output in $work/TAG.SIDE
wrapped() {
  local wrap=$1 tag=$2 side=$3
  shift 3
  if [[ $wrap == strace ]]; then
    strace -f -c -o "$work/$tag.$side" "$@"
  else
    perf stat -x, -e task-clock,context-switches -o "$work/$tag.$side" "$@"
  fi
}

# WRAP TAG COUNT OP MODE: one arpma-perf pair; prints the operations the client made.
run_arpma() {
  local wrap=$1 tag=$2 count=$3 op=$4 mode=$5
  next_port
  wrapped "$wrap" "$tag" server timeout 120 "$perf_tool" server --once --addr "$addr" \
    --port "$port" >"$work/$tag.server.out" 2>&1 &
  local server=$!
  wait_listening "$(transport)"
  wrapped "$wrap" "$tag" client timeout 120 "$perf_tool" client --addr "$addr" --port "$port" \
    --op "$op" --mode "$mode" --size 64 --iters "$count" --warmup 100 \
    >"$work/$tag.client.out" 2>&1 || {
    cat "$work/$tag.client.out" >&2
    return 1
  }
  wait "$server"
  echo "$count"
}

# WRAP TAG SECONDS: one sockperf TCP ping-pong; prints the messages the client sent.
run_sockperf() {
  local wrap=$1 tag=$2 seconds=$3
  next_port
  wrapped "$wrap" "$tag" server timeout $((seconds + 10)) sockperf server --tcp -i "$addr" \
    -p "$port" >"$work/$tag.server.out" 2>&1 &
  local server=$!
  wait_listening tcp
  wrapped "$wrap" "$tag" client timeout $((seconds + 10)) sockperf ping-pong --tcp -i "$addr" \
    -p "$port" -m 64 -t "$seconds" >"$work/$tag.client.out" 2>&1
  kill -INT "$server" 2>/dev/null || true
  wait "$server" || true
  sed -n 's/.*\[Total Run\].*SentMessages=\([0-9]*\).*/\1/p' "$work/$tag.client.out"
}

# WRAP TAG COUNT PROGRAM [ARGS]: one perftest pair; prints the iterations.
run_perftest() {
  local wrap=$1 tag=$2 count=$3 program=$4
  shift 4
  next_port
  wrapped "$wrap" "$tag" server timeout 120 "$program" "${perftest_dev[@]}" -p "$port" -s 64 \
    -n "$count" "$@" >"$work/$tag.server.out" 2>&1 &
  local server=$!
  wait_listening rdma_cm
  wrapped "$wrap" "$tag" client timeout 120 "$program" "${perftest_dev[@]}" -p "$port" -s 64 \
    -n "$count" "$@" "$addr" >"$work/$tag.client.out" 2>&1
  wait "$server"
  echo "$count"
}

# ---- reporting ------------------------------------------------------------------------------

# ROW_NAME RUNNER ARGS...: runs RUNNER at both counts, under strace and under perf, and prints
# one line per side. For sockperf the counts are seconds.
row() {
  local name=$1 runner=$2
  shift 2
  local lo=$small hi=$large
  if [[ $runner == run_sockperf ]]; then lo=1 hi=3; fi
  local n_lo n_hi p_lo p_hi
  n_lo=$("$runner" strace s_lo "$lo" "$@")
  n_hi=$("$runner" strace s_hi "$hi" "$@")
  p_lo=$("$runner" perf p_lo "$lo" "$@")
  p_hi=$("$runner" perf p_hi "$hi" "$@")
  for n in "$n_lo" "$n_hi" "$p_lo" "$p_hi"; do
    [[ $n =~ ^[0-9]+$ ]] || {
      echo "syscalls.sh: $name: a run failed (its output: $work)" >&2
      trap - EXIT
      exit 1
    }
  done
  for side in client server; do
    local ops_strace ops_perf
    ops_strace=$((n_hi - n_lo))
    ops_perf=$((p_hi - p_lo))
    local per_call
    per_call=$(join -a2 -e0 -o 0,1.2,2.2 <(strace_calls "$work/s_lo.$side" | sort) \
      <(strace_calls "$work/s_hi.$side" | sort) |
      awk -v n="$ops_strace" '{ d = ($3 - $2) / n; if (d > 0.005 || $1 == "total") print $1, d }')
    local total breakdown cpu_cs
    total=$(awk '$1 == "total" { printf "%.1f", $2 }' <<<"$per_call")
    breakdown=$(awk '$1 != "total"' <<<"$per_call" | sort -k2 -gr | head -n "$top" |
      awk '{ printf "%s%s %.1f", (NR > 1 ? ", " : ""), $1, $2 }')
    read -r t_lo c_lo < <(perf_figures "$work/p_lo.$side")
    read -r t_hi c_hi < <(perf_figures "$work/p_hi.$side")
    cpu_cs=$(awk -v n="$ops_perf" -v t="$t_hi" -v u="$t_lo" -v c="$c_hi" -v d="$c_lo" \
      'BEGIN { printf "%.2f | %.1f", (c - d) / n, 1000 * (t - u) / n }')
    printf '| %s | %s | %s | %s | %s |\n' "$name" "$side" "$total" "$cpu_cs" "$breakdown"
  done
}

echo "# bench/syscalls.sh: $provider provider on $addr, 64 B, one operation in flight;"
echo "# per operation, differential over $small and $large operations"
echo
echo "| case | side | syscalls/op | context switches/op | CPU µs/op | largest (calls/op) |"
echo "|---|---|---|---|---|---|"
for op in $ops; do
  for mode in $modes; do
    row "arpma-perf $op, $mode" run_arpma "$op" "$mode"
  done
  if [[ $provider == verbs ]]; then
    case $op in
      write) row "ib_write_lat (polling)" run_perftest ib_write_lat ;;
      send)
        row "ib_send_lat (polling)" run_perftest ib_send_lat
        row "ib_send_lat -e (events)" run_perftest ib_send_lat -e
        ;;
      read) row "ib_read_lat (polling)" run_perftest ib_read_lat ;;
    esac
  fi
done
if [[ $provider == soft ]]; then
  command -v sockperf >/dev/null || {
    echo "syscalls.sh: sockperf is missing (scripts/install-deps.sh installs it)" >&2
    exit 2
  }
  row "sockperf TCP ping-pong" run_sockperf
fi
