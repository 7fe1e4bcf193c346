#!/usr/bin/env bash
# Two Soft-RoCE guests joined by a virtual link: a server command in node A, a client command
# in node B, each on its own kernel, rxe0 and clock (issue 20, item 1).
#
#   test/vm/run-two-nodes.sh [--timeout SECS] [--disk IMAGE] [--pidfile FILE]
#                            --server 'COMMAND' --client 'COMMAND'
#
# --disk and --pidfile go to node A's test/vm/run-in-rxe-vm.sh (its /dev/vda; its QEMU's pid).
# Node A is 192.168.77.1 (fd61:7270:6d61::1), node B 192.168.77.2; each has a virtio NIC
# (eth0) carrying its rxe0, and the two NICs are joined by QEMU datagrams between two free UDP
# ports of 127.0.0.1 (test/vm/run-in-rxe-vm.sh --nic): nothing else is on that link, no host
# network is involved. Both COMMANDs run under `bash -c` in the repository's directory, with
# NODE_SERVER_IP, NODE_CLIENT_IP and their IPv6 twins NODE_SERVER_IP6, NODE_CLIENT_IP6 set
# (and RXE_VM_* of their own node, as in
# run-in-rxe-vm.sh). The client's COMMAND starts once node A answers on the link
# (test/vm/wait-for-node.sh, 60 s at most), but must still wait for the server itself (e.g.
# retry its connect): the guests boot at their own pace.
#
# Prints both outputs, each line prefixed with [A] or [B]. Exit status: 0 when both commands
# exit 0; else the server's status if it failed, else the client's; 124 on timeout; 125 when
# a guest could not be run.
set -euo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
timeout=600
server=
client=
node_a=()
usage() { sed -n '2,20{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --timeout) timeout=${2:-}; shift 2 || { usage >&2; exit 125; } ;;
    --server) server=${2:-}; shift 2 || { usage >&2; exit 125; } ;;
    --client) client=${2:-}; shift 2 || { usage >&2; exit 125; } ;;
    --disk | --pidfile) [[ $# -ge 2 ]] || { usage >&2; exit 125; }; node_a+=("$1" "$2"); shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run-two-nodes: unknown argument '$1'" >&2; usage >&2; exit 125 ;;
  esac
done
[[ -n $server && -n $client ]] || { usage >&2; exit 125; }

# Two free UDP ports on 127.0.0.1 for the link, one per node.
ports=()
for _ in $(seq 50); do
  candidate=$((20000 + RANDOM % 20000))
  if [[ -z $(ss -Huln "sport = :$candidate") && -z $(ss -Huln "sport = :$((candidate + 1))") ]]; then
    ports=("$candidate" "$((candidate + 1))")
    break
  fi
done
[[ ${#ports[@]} -eq 2 ]] || { echo "run-two-nodes: no free ports for the link" >&2; exit 125; }

export NODE_SERVER_IP=192.168.77.1 NODE_CLIENT_IP=192.168.77.2
export NODE_SERVER_IP6=fd61:7270:6d61::1 NODE_CLIENT_IP6=fd61:7270:6d61::2
pids=()
# shellcheck disable=SC2317  # invoked by the trap
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop EXIT

t0=$SECONDS
"$here/run-in-rxe-vm.sh" --timeout "$timeout" --ip "$NODE_SERVER_IP" "${node_a[@]}" \
  --nic "udp:${ports[0]}:${ports[1]}" -- bash -c "$server" > >(sed -u 's/^/[A] /') 2>&1 &
pids+=($!)
"$here/run-in-rxe-vm.sh" --timeout "$timeout" --ip "$NODE_CLIENT_IP" \
  --nic "udp:${ports[1]}:${ports[0]}" -- \
  bash -c "\"$here/wait-for-node.sh\" $NODE_SERVER_IP 60; $client" > >(sed -u 's/^/[B] /') 2>&1 &
pids+=($!)

rc_a=0 rc_b=0
wait "${pids[0]}" || rc_a=$?
wait "${pids[1]}" || rc_b=$?
pids=()
echo "run-two-nodes: node A (server) exit status $rc_a, node B (client) exit status $rc_b," \
  "$((SECONDS - t0)) s"
[[ $rc_a -ne 0 ]] && exit "$rc_a"
exit "$rc_b"
