#!/usr/bin/env bash
# Issue 17, items 2 and 3: 64 B round trips of arpma-perf against perftest on the same rxe device,
# in rounds that alternate the two (ROUNDS, default 5; ITERS operations each, default 5000),
# medians of the per-round ratios:
#   write, busy-poll     vs ib_write_lat (polling)   target <= 1.15
#   send,  busy-poll     vs ib_send_lat (polling)    target <= 1.15
#   send,  co_await (fd) vs ib_send_lat -e (events)  target <= 1.0
#   write, co_await (fd) vs ib_write_lat (polling)   target <= 2.0
# perftest's ib_write_lat and ib_send_lat are ping-pongs that print half the round trip
# (t_typical); this script doubles it. arpma-perf prints the round trip (its median).
#
#   test/vm/run-in-rxe-vm.sh -- bench/rxe_latency.sh build/default
set -euo pipefail
build=$(cd -- "${1:?usage: $0 BUILD_DIR}" && pwd -P)
addr=${RXE_VM_IP:?run me inside the guest: test/vm/run-in-rxe-vm.sh -- $0 BUILD_DIR}
export ARPMA_PROVIDER=verbs ARPMA_TEST_ADDR=$addr
tool=$build/tools/arpma-perf/arpma-perf
dev=(-d "${RXE_VM_DEV:-rxe0}" -x "${RXE_VM_GID_INDEX:-1}")
iters=${ITERS:-5000}
rounds=${ROUNDS:-5}
port=19600

# OP MODE: arpma-perf's median round trip, µs
arpma() {
  port=$((port + 1))
  timeout 120 "$tool" server --once --addr "$addr" --port "$port" >/dev/null 2>&1 &
  local server=$!
  sleep 1
  timeout 120 "$tool" client --addr "$addr" --port "$port" --test lat --op "$1" --mode "$2" \
    --size 64 --iters "$iters" --warmup 200 | awk '$1 == 64 && NF >= 9 { print $4 }'
  wait "$server" || true
}
# PROGRAM [ARGS]: perftest's round trip (twice t_typical), µs
perftest() {
  port=$((port + 1))
  local program=$1
  shift
  timeout 120 "$program" "${dev[@]}" -p "$port" -s 64 -n "$iters" "$@" >/dev/null 2>&1 &
  local server=$!
  sleep 1
  timeout 120 "$program" "${dev[@]}" -p "$port" -s 64 -n "$iters" "$@" "$addr" 2>/dev/null |
    awk '$1 == 64 && NF >= 7 { printf "%.2f\n", 2 * $5 }'
  wait "$server" || true
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

declare -A ratios
cases=("write busy-poll|ib_write_lat|1.15" "send busy-poll|ib_send_lat|1.15"
  "send coroutine|ib_send_lat -e|1.0" "write coroutine|ib_write_lat|2.0")
echo "guest: $(nproc) CPUs (emulated), $rounds rounds, $iters round trips of 64 B per run"
for ((r = 1; r <= rounds; ++r)); do
  line="round $r:"
  for c in "${cases[@]}"; do
    IFS='|' read -r what base _ <<<"$c"
    read -r -a base_cmd <<<"$base"
    read -r op mode <<<"$what"
    b=$(perftest "${base_cmd[@]}")
    a=$(arpma "$op" "$mode")
    ratios[$what]+="$(ratio "$a" "$b") "
    line+=" $op $mode ${a:--} us vs $base ${b:--} us;"
  done
  echo "$line"
done
for c in "${cases[@]}"; do
  IFS='|' read -r what base target <<<"$c"
  # shellcheck disable=SC2086 # the ratios are one word each
  echo "median ratio, arpma-perf $what / $base: $(printf '%s\n' ${ratios[$what]} | grep -v -- - | median)  target <= $target"
done
