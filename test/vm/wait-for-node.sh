#!/usr/bin/env bash
# Waits, at most SECONDS, until ADDR's kernel answers on the guests' link: a TCP connect to its
# port 9 that is refused (or accepted) means the address is up there and answers ARP; one that
# times out or finds no route means that node is still booting.
#
#   test/vm/wait-for-node.sh ADDR SECONDS
#
# test/vm/run-two-nodes.sh runs it in node B before the client's command: the two guests boot
# at their own pace, and a client's first step, rpma_utils_get_ibv_context(ADDR, REMOTE), is one
# rdma_resolve_addr that gives up after librpma's 1 s when node A does not answer ARP yet (seen
# in CI: node B's power-cut client failed "finding the RDMA device" while node A still booted).
# Exit status: 0 once ADDR answered, 1 if it did not within SECONDS.
set -uo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 ADDR SECONDS" >&2; exit 2; }
addr=$1
end=$((SECONDS + $2))
while ((SECONDS < end)); do
  if out=$(timeout 2 bash -c "exec 3<>/dev/tcp/$addr/9" 2>&1) || [[ $out == *refused* ]]; then
    exit 0
  fi
  sleep 0.2
done
echo "wait-for-node: $addr did not answer within $2 s" >&2
exit 1
