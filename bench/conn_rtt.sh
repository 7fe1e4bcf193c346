#!/usr/bin/env bash
# Issue 17, item 6: connection setup on a link with a real round trip, where requests in
# flight can hide it. Two ways to run it:
#
#   test/vm/run-in-rxe-vm.sh --timeout 1500 -- bench/conn_rtt.sh netns build/default
#       the soft provider, in one guest: server and client in two network namespaces joined
#       by a veth pair (10.77.0.1 - 10.77.0.2)
#   test/vm/run-two-nodes.sh --timeout 1500 \
#     --server 'bench/conn_rtt.sh server build/default' \
#     --client 'bench/conn_rtt.sh client build/default'
#       verbs (PROVIDERS="verbs", the default here; "soft verbs" for both): the two guests of
#       run-two-nodes.sh, each node's rxe0 on its eth0, the link between them (rxe cannot
#       run between two namespaces of one guest: its UDP socket lives in the initial one)
#
# For each one-way delay (DELAYS, default "0 200us 2ms": `tc qdisc ... netem delay D` on both
# ends of the link, so a round trip gains 2 D), ROUNDS times (default 3) in turn:
#   - the blocking C path, sequentially: bench/librpma_compare on arpma's librpma.so.0
#     (rpma_conn_req_new + rpma_conn_req_connect + ESTABLISHED + disconnect + CLOSED);
#   - Debian's librpma running the same program (verbs only: it has no soft provider);
#   - the C++ path (bench/conn_setup_bench) with 1, 16 and 64 connections in flight on one
#     thread (IN_FLIGHT="1 4 16 ..." for other counts).
# Every measurement is one server process and one client process on a port of its own; the
# client first makes one untimed connection that waits for its server (on two nodes both sides
# go through the same list in the same order). The client's side prints one line per
# measurement (connections/s and how busy the client's CPUs were), then the medians and the
# ratio of 64 in flight to the sequential C path. Bounded: counts are fixed, every process has
# a timeout.
set -uo pipefail

if [[ $# -ne 2 || ! $1 =~ ^(server|client|netns)$ || ! -d $2 ]]; then
  echo "usage: $0 server|client|netns BUILD_DIR (inside the guests, see above)" >&2
  exit 2
fi
side=$1
build=$(cd -- "$2" && pwd -P)
if [[ $side == netns ]]; then
  [[ -n ${RXE_VM_IP:-} ]] || { echo "run me inside the guest: test/vm/run-in-rxe-vm.sh" >&2; exit 2; }
  addr=10.77.0.1
  if ! { ip netns add arpma_a && ip netns add arpma_b &&
    ip link add va netns arpma_a type veth peer name vb netns arpma_b &&
    ip -n arpma_a addr add 10.77.0.1/24 dev va && ip -n arpma_b addr add 10.77.0.2/24 dev vb &&
    ip -n arpma_a link set va up && ip -n arpma_b link set vb up &&
    ip -n arpma_a link set lo up && ip -n arpma_b link set lo up; }; then
    echo "network namespaces: setup failed" >&2
    exit 1
  fi
  # gone again at the end, so that the next run in the same guest can set them up
  trap 'ip netns del arpma_a; ip netns del arpma_b' EXIT
  default_providers=soft
else
  addr=${NODE_SERVER_IP:?"run me through test/vm/run-two-nodes.sh"}
  default_providers=verbs
fi
rounds=${ROUNDS:-3}
read -r -a delays <<<"${DELAYS:-0 200us 2ms}"
# connections per measurement: sequential, then the C++ path with each count of IN_FLIGHT
# (default "1 16 64"; one in flight makes N_SEQ connections, more make N_MANY)
n_seq=${N_SEQ:-40}
read -r -a in_flight <<<"${IN_FLIGHT:-1 16 64}"
n_of() { if [[ $1 == 1 ]]; then echo "$n_seq"; else echo "${N_MANY:-200}"; fi; }
prog=$build/bench/librpma_compare
port=7500
failed=0

# shellcheck source=bench/guest_stats.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/guest_stats.sh"

# DEV [NETNS]: the delay on one end of the link
delay_on() {
  local ns=()
  [[ -n ${3:-} ]] && ns=(-n "$3")
  tc "${ns[@]}" qdisc del dev "$2" root 2>/dev/null
  [[ $1 == 0 ]] || tc "${ns[@]}" qdisc add dev "$2" root netem delay "$1" ||
    { echo "tc netem failed" >&2; exit 1; }
}
set_delay() {
  if [[ $side == netns ]]; then
    delay_on "$1" va arpma_a
    delay_on "$1" vb arpma_b
  else
    delay_on "$1" eth0
  fi
}

# KEY COMMAND...: one measurement on the next port; the client records connections/s under KEY.
declare -A results
measure() {
  local key=$1 out rc b0 i0
  shift
  port=$((port + 1))
  if [[ $side == server ]]; then
    out=$(timeout 200 "$@" server 2>&1) || echo "server $key (port $port) failed: $out" >&2
    [[ -n $out ]] && echo "server $key: $out"
    return
  fi
  local server=
  if [[ $side == netns ]]; then
    ip netns exec arpma_a timeout 200 "$@" server >/tmp/conn_rtt.server 2>&1 &
    server=$!
  fi
  read -r b0 i0 < <(cpu)
  local t0=$EPOCHREALTIME
  if [[ $side == netns ]]; then
    out=$(ip netns exec arpma_b timeout 200 "$@" client 2>&1)
  else
    out=$(timeout 200 "$@" client 2>&1)
  fi
  rc=$?
  if [[ -n $server ]]; then
    wait "$server" || echo "  server $key failed: $(cat /tmp/conn_rtt.server)"
  fi
  out+=" ($(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s)"
  local rate busy
  rate=$(awk '/connect_per_s/ { print $2 }' <<<"$out")
  busy=$(busy_since "$b0" "$i0")
  if [[ $rc -ne 0 || -z $rate ]]; then
    echo "  $key: FAILED (exit $rc): $out"
    failed=1
    return
  fi
  results[$key]+="$rate "
  echo "  $key: $rate connections/s (client CPU $busy%)"
}

read -r -a providers <<<"${PROVIDERS:-$default_providers}"
for provider in "${providers[@]}"; do
  export ARPMA_PROVIDER=$provider
  for delay in "${delays[@]}"; do
    set_delay "$delay"
    for ((r = 1; r <= rounds; ++r)); do
      [[ $side != server ]] && echo "$provider, one-way delay $delay, round $r:"
      measure "$provider $delay C sequential" \
        env LD_LIBRARY_PATH="$build/librpma-abi" "$prog" "$addr" "$port" connect "$n_seq"
      if [[ $provider == verbs ]]; then
        measure "$provider $delay librpma sequential" "$prog" "$addr" "$port" connect "$n_seq"
      fi
      for k in "${in_flight[@]}"; do
        measure "$provider $delay C++ $k in flight" \
          "$build/bench/conn_setup_bench" "$addr" "$port" "$(n_of "$k")" "$k" --role
      done
    done
  done
done
set_delay 0

if [[ $side != server ]]; then
  echo "medians of $rounds rounds, connections/s (one-way delay D on each end of the link):"
  # the ratio's numerator: 64 in flight, or the most IN_FLIGHT measured
  top=64
  [[ " ${in_flight[*]} " == *" 64 "* ]] || top=${in_flight[-1]}
  header="| provider | delay | C sequential | librpma sequential |"
  for k in "${in_flight[@]}"; do header+=" C++ $k |"; done
  echo "$header $top / C sequential |"
  for provider in "${providers[@]}"; do
    for delay in "${delays[@]}"; do
      line="| $provider | $delay |"
      seq_median=- top_median=-
      for what in "C sequential" "librpma sequential" "${in_flight[@]}"; do
        [[ $what =~ ^[0-9]+$ ]] && what="C++ $what in flight"
        v=${results["$provider $delay $what"]:-}
        m=$([[ -n $v ]] && tr ' ' '\n' <<<"$v" | grep . | median || echo -)
        line+=" $m |"
        [[ $what == "C sequential" ]] && seq_median=$m
        [[ $what == "C++ $top in flight" ]] && top_median=$m
      done
      ratio=$(awk -v a="$top_median" -v b="$seq_median" 'BEGIN { if (b > 0 && a != "-") printf "%.1f", a / b; else print "-" }')
      echo "$line $ratio |"
    done
  done
fi
exit $failed
