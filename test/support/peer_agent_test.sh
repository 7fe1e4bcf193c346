#!/usr/bin/env bash
# The peer agent on loopback (ctest peer_agent.loopback): the peer-kill tests with their peer
# processes started through test/support/peer_agent.cpp, as between two guests; requests it
# must refuse (a program outside its root, a variable that is not ARPMA_*) get nothing started.
#
#   test/support/peer_agent_test.sh AGENT TEST_BINARY ROOT
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: $0 AGENT TEST_BINARY ROOT" >&2; exit 2; }
agent=$1 tests=$2 root=$3
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$agent" 127.0.0.1 "$port" "$root" 120 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done

# refused REQUEST: the agent answers nothing and ends the connection (had it started the
# program, the kill that follows the request would be answered).
refused() {
  local answered
  answered=$(timeout 15 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; printf '%bK' '$1' >&3
    { cat <&3 2>/dev/null || true; } | wc -c")
  if [[ $answered -ne 0 ]]; then
    echo "peer_agent answered a request it must refuse: $1" >&2
    exit 1
  fi
}
refused "exec /bin/sh\nenv ARPMA_PEER_KILL_CHILD=0:0:1\n"
refused "exec $tests\nenv LD_PRELOAD=/nonexistent.so\n"
refused "exec $tests\nenv arpma_lower=1\n"

ARPMA_TEST_PEER_AGENT=127.0.0.1:$port "$tests" --gtest_filter='*peer_kill*'
exec 3<>"/dev/tcp/127.0.0.1/$port" && echo quit >&3 && exec 3>&-
wait "$pid"
