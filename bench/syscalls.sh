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
# leaves out connection setup and teardown. Everything is counted by one `perf stat` per run
# (every thread): syscalls by the kernel's syscall tracepoints, which count without stopping the
# program, as strace's ptrace stops did (they made each syscall take tens of µs in the guest,
# so every time-bounded poll loop ran its course differently under strace than without it);
# context switches and CPU time in the same run. Client and server are reported apart.
# Bounded: every run has a timeout.
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
command -v perf >/dev/null || {
  echo "syscalls.sh: perf is missing (scripts/install-deps.sh installs it)" >&2
  exit 2
}
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
# shellcheck source=bench/ports.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/ports.sh"
next_port() {
  port=$(unused_port_after "$(cat "$work/port")")
  echo "$port" >"$work/port"
}

# ---- measuring ------------------------------------------------------------------------------

# The syscalls counted by name; the rest add up to "other" (raw_syscalls counts them all).
named_syscalls=(write read ioctl epoll_wait epoll_pwait epoll_ctl poll ppoll recvfrom recvmsg
  sendmsg sendto futex timerfd_settime clock_nanosleep sched_yield)
events=task-clock,context-switches,raw_syscalls:sys_enter
for name in "${named_syscalls[@]}"; do events+=,syscalls:sys_enter_$name; done
# perf stat -x, → "name count" lines: each syscall's name, "total", "task-clock" (ms),
# "context-switches"
perf_counts() {
  awk -F, '{ n = $3; sub(/^syscalls:sys_enter_/, "", n); sub(/^raw_syscalls:sys_enter$/, "total", n)
             if (n != "" && $1 ~ /^[0-9.]+$/) print n, $1 }' "$1"
}
if ! perf stat -e raw_syscalls:sys_enter,syscalls:sys_enter_write -- true >/dev/null 2>&1; then
  echo "syscalls.sh: perf cannot count syscall tracepoints here (root, or" \
    "kernel.perf_event_paranoid <= -1, and a kernel with CONFIG_FTRACE_SYSCALLS)" >&2
  exit 2
fi

# Waits (5 s at most) for a TCP listener on $port, where there is one to see (sockperf, the
# soft provider); a fixed pause for rdma_cm's port space.
wait_listening() {
  if [[ $1 == tcp ]]; then
    wait_tcp_listener "$port" syscalls.sh
    return
  fi
  sleep 1
}
transport() { if [[ $provider == soft ]]; then echo tcp; else echo rdma_cm; fi; }

# TAG SIDE CMD...: runs CMD under perf stat, its counts in $work/TAG.SIDE
wrapped() {
  local tag=$1 side=$2
  shift 2
  perf stat -x, -e "$events" -o "$work/$tag.$side" "$@"
}

# TAG COUNT OP MODE: one arpma-perf pair; prints the operations the client made.
run_arpma() {
  local tag=$1 count=$2 op=$3 mode=$4
  next_port
  wrapped "$tag" server timeout 120 "$perf_tool" server --once --addr "$addr" \
    --port "$port" >"$work/$tag.server.out" 2>&1 &
  local server=$!
  wait_listening "$(transport)"
  wrapped "$tag" client timeout 120 "$perf_tool" client --addr "$addr" --port "$port" \
    --op "$op" --mode "$mode" --size 64 --iters "$count" --warmup 100 \
    >"$work/$tag.client.out" 2>&1 || {
    cat "$work/$tag.client.out" >&2
    return 1
  }
  wait "$server"
  echo "$count"
}

# TAG SECONDS: one sockperf TCP ping-pong; prints the messages the client sent.
run_sockperf() {
  local tag=$1 seconds=$2
  next_port
  wrapped "$tag" server timeout $((seconds + 10)) sockperf server --tcp -i "$addr" \
    -p "$port" >"$work/$tag.server.out" 2>&1 &
  local server=$!
  wait_listening tcp
  wrapped "$tag" client timeout $((seconds + 10)) sockperf ping-pong --tcp -i "$addr" \
    -p "$port" -m 64 -t "$seconds" >"$work/$tag.client.out" 2>&1
  kill -INT "$server" 2>/dev/null || true
  wait "$server" || true
  sed -n 's/.*\[Total Run\].*SentMessages=\([0-9]*\).*/\1/p' "$work/$tag.client.out"
}

# TAG COUNT PROGRAM [ARGS]: one perftest pair; prints the iterations.
run_perftest() {
  local tag=$1 count=$2 program=$3
  shift 3
  next_port
  wrapped "$tag" server timeout 120 "$program" "${perftest_dev[@]}" -p "$port" -s 64 \
    -n "$count" "$@" >"$work/$tag.server.out" 2>&1 &
  local server=$!
  wait_listening rdma_cm
  wrapped "$tag" client timeout 120 "$program" "${perftest_dev[@]}" -p "$port" -s 64 \
    -n "$count" "$@" "$addr" >"$work/$tag.client.out" 2>&1
  wait "$server"
  echo "$count"
}

# ---- reporting ------------------------------------------------------------------------------

# ROW_NAME RUNNER ARGS...: runs RUNNER at both counts and prints one line per side. For
# sockperf the counts are seconds.
row() {
  local name=$1 runner=$2
  shift 2
  local lo=$small hi=$large
  if [[ $runner == run_sockperf ]]; then lo=1 hi=3; fi
  local n_lo n_hi
  n_lo=$("$runner" lo "$lo" "$@")
  n_hi=$("$runner" hi "$hi" "$@")
  for n in "$n_lo" "$n_hi"; do
    [[ $n =~ ^[0-9]+$ ]] || {
      echo "syscalls.sh: $name: a run failed (its output: $work)" >&2
      trap - EXIT
      exit 1
    }
  done
  for side in client server; do
    local per_op
    per_op=$(join -a2 -e0 -o 0,1.2,2.2 <(perf_counts "$work/lo.$side" | sort) \
      <(perf_counts "$work/hi.$side" | sort) |
      awk -v n="$((n_hi - n_lo))" '{ d = ($3 - $2) / n
        if ($1 == "task-clock") d *= 1000  # ms → µs
        print $1, d }')
    local figures breakdown
    figures=$(awk '{ v[$1] = $2 }
      END { printf "%.1f | %.2f | %.1f", v["total"], v["context-switches"], v["task-clock"] }' \
      <<<"$per_op")
    breakdown=$(awk '$1 == "total" { other += $2 }
      $1 != "total" && $1 != "task-clock" && $1 != "context-switches" { other -= $2; print }
      END { print "other", other }' <<<"$per_op" | awk '$2 > 0.05' | sort -k2 -gr |
      head -n "$top" |
      awk '{ printf "%s%s %.1f", (NR > 1 ? ", " : ""), $1, $2 }')
    printf '| %s | %s | %s | %s |\n' "$name" "$side" "$figures" "$breakdown"
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
