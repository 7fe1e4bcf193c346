#!/usr/bin/env bash
# One side of the two-node suite (issue 20, item 1): every example pair of BUILD_DIR with its
# server in node A and its client in node B, two (--full: five) of them again over IPv6, the C examples with
# one side on Debian's librpma and the other on arpma (both ways), arpma-perf between the
# nodes, then the two-process integration tests with their peer process in node A, on the verbs
# provider (each node's rxe0). Run by test/vm/run-two-nodes.sh:
#
#   test/vm/run-two-nodes.sh --server 'test/vm/two-nodes-suite.sh server build/default' \
#                            --client 'test/vm/two-nodes-suite.sh client build/default'
#
# Over IPv6 two of the pairs (C and co_await; CI's time); --full, given to both sides, all five
# (scripts/test.sh --nodes).
#
# The sides go through the same list in the same order, pair i on port 7310 + i; a client
# retries until its server listens (every example client does, for up to 10 s; arpma-perf's
# client is retried here). Exit status: 0 when every program of this side exited 0.
set -uo pipefail

full=0
if [[ $# -eq 3 && $3 == --full ]]; then
  full=1
  set -- "$1" "$2"
fi
if [[ $# -ne 2 || ! $1 =~ ^(server|client)$ || ! -d $2 ]]; then
  echo "usage: $0 server|client BUILD_DIR [--full] (inside a node of test/vm/run-two-nodes.sh)" >&2
  exit 2
fi
side=$1
build=$(cd -- "$2" && pwd -P)
addr=${NODE_SERVER_IP:?"run me through test/vm/run-two-nodes.sh"}
export ARPMA_PROVIDER=verbs

pairs=(
  connection/connection_c connection/connection_callback connection/connection_coroutine
  datapath/ping_pong_c datapath/ping_pong_callback datapath/ping_pong_coroutine
  datapath/write_flush_c datapath/write_flush_coroutine
  datapath/read_callback datapath/read_coroutine
  datapath/atomic_log_c datapath/atomic_log_coroutine
  datapath/srq_c datapath/srq_coroutine datapath/rcq_c
)
failed=()
port=7310
# run_one NAME COMMAND...: runs COMMAND <addr> <port> (60 s at most; the address: $to, else
# $addr), prints its output and status under NAME, and takes the next port.
run_one() {
  local name=$1 t0=$EPOCHREALTIME rc=0
  shift
  timeout 60 "$@" "${to:-$addr}" "$port" >"/tmp/two-nodes.$side.out" 2>&1 </dev/null || rc=$?
  sed "s|^|  $name $side: |" "/tmp/two-nodes.$side.out"
  printf '%s %s: exit status %d (%.1f s)\n' "$name" "$side" "$rc" \
    "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')"
  [[ $rc -eq 0 ]] || failed+=("$name")
  port=$((port + 1))
}

for pair in "${pairs[@]}"; do
  run_one "${pair##*/}" "$build/examples/${pair}_$side"
done

# IPv6 across the link (issue 20, item 3): the ULA addresses' RoCEv2 GIDs, one pair per
# flavour and kind of operation.
to=${NODE_SERVER_IP6:?"run me through test/vm/run-two-nodes.sh"}
ipv6=(connection/connection_c datapath/ping_pong_coroutine)
[[ $full -eq 0 ]] || ipv6+=(datapath/write_flush_c datapath/read_callback datapath/atomic_log_coroutine)
for pair in "${ipv6[@]}"; do
  run_one "${pair##*/} over IPv6" "$build/examples/${pair}_$side"
done
to=

# Interop on the wire: the C examples built on Debian's librpma (test/compat/CMakeLists.txt),
# one side on arpma through its drop-in librpma.so.0, the other on Debian's librpma; then the
# other way round.
on_librpma=$build/test/compat/on-librpma
dropin=$build/librpma-abi
interop=(connection ping_pong write_flush atomic_log srq rcq)
for arpma_side in server client; do
  for example in "${interop[@]}"; do
    bin=$on_librpma/${example}_$side
    if [[ $side == "$arpma_side" ]]; then
      # Fail, not pass vacuously, when the drop-in would not be the one loaded. (ldd's output
      # is taken whole: `ldd | grep -q` under pipefail fails when grep stops reading first —
      # seen in CI, 1 in 300 on the host.)
      deps=$(LD_LIBRARY_PATH=$dropin ldd "$bin")
      if [[ $deps != *"$dropin/librpma.so.0"* ]]; then
        failed+=("interop: $bin does not load $dropin/librpma.so.0")
      fi
      run_one "$example (arpma $side, librpma peer)" env LD_LIBRARY_PATH="$dropin" "$bin"
    else
      deps=$(ldd "$bin")
      if [[ $deps != *"librpma.so.0 => /lib"* ]]; then
        failed+=("interop: $bin does not load Debian's librpma")
      fi
      run_one "$example (librpma $side, arpma peer)" "$bin"
    fi
  done
done

# arpma-perf between the nodes: 64 B write and send latency, write bandwidth at depth 16.
perf=$build/tools/arpma-perf/arpma-perf
runs=("--test lat --op write --iters 2000" "--test lat --op send --iters 2000"
  "--test bw --op write --qd 16 --iters 20000")
if [[ $side == server ]]; then
  rc=0
  timeout 300 "$perf" server --addr "$addr" --port "$port" --clients "${#runs[@]}" \
    --provider verbs </dev/null || rc=$?
  [[ $rc -eq 0 ]] || failed+=("arpma-perf server")
else
  for run in "${runs[@]}"; do
    ok=0
    for _ in $(seq 30); do
      # shellcheck disable=SC2086 # run is a list of options
      if timeout 120 "$perf" client --addr "$addr" --port "$port" --provider verbs --size 64 \
        $run </dev/null; then
        ok=1
        break
      fi
      sleep 1
    done
    [[ $ok -eq 1 ]] || failed+=("arpma-perf client $run")
  done
fi

# The two-process integration tests (peer killed at every phase, C++, C and streams) with the
# test in node B and its peer process in node A, started there by test/support/peer_agent.cpp:
# the peer's death is node A's kernel tearing its objects down, seen over the link.
agent_port=7399
if [[ $side == server ]]; then
  rc=0
  # The peer's own address and the test's, as the child reads them (support/test_addr.hpp).
  ARPMA_TEST_ADDR=$addr ARPMA_TEST_PEER_ADDR=$NODE_CLIENT_IP timeout 600 \
    "$build/test/peer_agent" "$addr" "$agent_port" "$build" 540 </dev/null || rc=$?
  [[ $rc -eq 0 ]] || failed+=("peer_agent")
else
  for _ in $(seq 60); do
    timeout 2 bash -c "exec 3<>/dev/tcp/$addr/$agent_port" 2>/dev/null && break
    sleep 1
  done
  # ctest logs under the build's Testing/, the host's directory: a tmpfs of this node's own.
  mkdir -p "$build/Testing" && mount -t tmpfs tmpfs "$build/Testing"
  t0=$EPOCHREALTIME
  rc=0
  env ARPMA_TEST_ADDR="$NODE_CLIENT_IP" ARPMA_TEST_PEER_ADDR="$addr" \
    ARPMA_TEST_PEER_AGENT="$addr:$agent_port" timeout 400 \
    ctest --test-dir "$build" -L integration -R 'peer_kill' --no-tests=error \
    --output-on-failure -j "$(nproc)" </dev/null || rc=$?
  printf 'two-process integration tests, peer in node A: exit status %d (%.1f s)\n' "$rc" \
    "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')"
  [[ $rc -eq 0 ]] || failed+=("two-process integration tests")
  umount "$build/Testing"
  exec 3<>"/dev/tcp/$addr/$agent_port" && echo quit >&3 && exec 3>&-
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "two-nodes ($side): FAILED: ${failed[*]}"
  exit 1
fi
echo "two-nodes ($side): ${#pairs[@]} example programs, ${#ipv6[@]} over IPv6," \
  "$((2 * ${#interop[@]})) interop runs against Debian's librpma, arpma-perf and the" \
  "two-process integration tests passed"
