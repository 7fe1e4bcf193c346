#!/usr/bin/env bash
# 64 B round trips on the soft provider against TCP's, in one run: sockperf's
# TCP ping-pong and arpma-perf's RDMA write (busy-poll and co_await on the
# completion channel) and send ping-pong (busy-poll), ROUNDS rounds (default
# 5) taken in turn, medians of each tool's median, and the ratios to
# sockperf's round trip (issue 17 item 4: write <= 1.5x busy-poll, <= 2x fd).
#
# sockperf prints half the round trip ("Latency", its percentiles): this
# script doubles its median, and prints the round trip its message count
# gives (SentMessages / RunTime) beside it as a check.
#
#   bench/soft_latency.sh [build-dir]     (default build/default; ROUNDS, ITERS, SECONDS_PER_RUN)
set -euo pipefail
build=$(cd -- "${1:-build/default}" && pwd -P)
perf_tool=$build/tools/arpma-perf/arpma-perf
[[ -x $perf_tool ]] || {
  echo "soft_latency.sh: $perf_tool not built" >&2
  exit 2
}
command -v sockperf >/dev/null || {
  echo "soft_latency.sh: sockperf is missing (scripts/install-deps.sh installs it)" >&2
  exit 2
}
rounds=${ROUNDS:-5}
iters=${ITERS:-20000}
seconds=${SECONDS_PER_RUN:-3}
addr=127.0.0.1
port=19700
work=$(mktemp -d "${TMPDIR:-/tmp}/arpma-latency.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

# shellcheck source=bench/ports.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/ports.sh"
wait_port() { wait_tcp_listener "$1" soft_latency.sh; }
next_port() { port=$(unused_port_after "$port"); }

# sockperf_rtt: prints "median_rtt_us count_rtt_us" of one ping-pong run.
sockperf_rtt() {
  next_port
  timeout $((seconds + 10)) sockperf server --tcp -i "$addr" -p "$port" >/dev/null 2>&1 &
  local server=$!
  wait_port "$port"
  timeout $((seconds + 10)) sockperf ping-pong --tcp -i "$addr" -p "$port" -m 64 -t "$seconds" \
    >"$work/sp.out" 2>&1
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  awk '/percentile 50.000/ { half = $NF }
       /\[Total Run\]/ { for (i = 1; i <= NF; i++) {
           if ($i ~ /^RunTime=/) { split($i, a, "="); t = a[2] + 0 }
           if ($i ~ /^SentMessages=/) { split($i, b, "="); n = b[2] + 0 } } }
       END { printf "%.2f %.2f\n", 2 * half, (n > 0 ? t * 1e6 / n : 0) }' "$work/sp.out"
}

# arpma_rtt OP MODE: the median round trip (us) of one arpma-perf run.
arpma_rtt() {
  next_port
  ARPMA_PROVIDER=soft timeout 60 "$perf_tool" server --addr "$addr" --port "$port" --once \
    >/dev/null 2>&1 &
  local server=$!
  wait_port "$port"
  ARPMA_PROVIDER=soft timeout 60 "$perf_tool" client --addr "$addr" --port "$port" --test lat \
    --op "$1" --mode "$2" --size 64 --iters "$iters" >"$work/ap.out" 2>&1
  wait "$server" 2>/dev/null || true
  awk '$1 == "64" { print $4 }' "$work/ap.out" | tail -1
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

: >"$work/rows"
for r in $(seq 1 "$rounds"); do
  read -r sp sp_count < <(sockperf_rtt)
  wb=$(arpma_rtt write busy-poll)
  wc=$(arpma_rtt write coroutine)
  sb=$(arpma_rtt send busy-poll)
  echo "$sp $sp_count $wb $wc $sb" >>"$work/rows"
  printf 'round %d: sockperf RTT %s us (count: %s)  write busy-poll %s  write co_await %s  send busy-poll %s\n' \
    "$r" "$sp" "$sp_count" "$wb" "$wc" "$sb"
done

col() { awk -v c="$1" '{ print $c }' "$work/rows" | median; }
ratio() { awk -v c="$1" '{ print $c / $1 }' "$work/rows" | median; }
echo
echo "64 B round trip, soft provider on loopback, medians of $rounds rounds (in turn):"
printf '  sockperf TCP ping-pong   %8.1f us  (from its message count: %.1f us)\n' "$(col 1)" "$(col 2)"
printf '  arpma write, busy-poll   %8.1f us  ratio %.2f (target <= 1.5)\n' "$(col 3)" "$(ratio 3)"
printf '  arpma write, co_await    %8.1f us  ratio %.2f (target <= 2.0)\n' "$(col 4)" "$(ratio 4)"
printf '  arpma send, busy-poll    %8.1f us  ratio %.2f\n' "$(col 5)" "$(ratio 5)"
