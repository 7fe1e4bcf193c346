#!/usr/bin/env bash
# The main job: installs what is missing, builds the examples of the default
# preset, and runs them on loopback, printing what happened:
#   1. rpma_conn_req_new in three flavours (co_await, callback, blocking C);
#   2. a connection with a private-data "hello" each way, server and client
#      as two processes, for each flavour (co_await, callbacks, C), each
#      side's lines prefixed "server |" / "client |".
# usage: scripts/demo.sh [addr [port]]   (default: 127.0.0.1 and a free port)
# Exits non-zero if any step failed. Runs in a few seconds once built; every
# process is bounded by a timeout.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-deps.sh

if [[ ! -f build/default/CMakeCache.txt ]]; then
  cmake --preset default
fi
targets=(conn_req_new_example conn_req_new_c)
for flavour in coroutine callback c; do
  targets+=("connection_${flavour}_server" "connection_${flavour}_client")
done
cmake --build --preset default -j "$(nproc)" --target "${targets[@]}"

addr=${1:-127.0.0.1}
port=${2:-}
examples=build/default/examples
failures=0

echo
echo "== 1. rpma_conn_req_new on ${addr}:${port:-7204}" \
  "(provider: ${ARPMA_PROVIDER:-auto}; auto = verbs when an RDMA device exists, else soft)"
echo "   (address and route resolved, queues created; no server needed at this stage)"
echo "-- C++: co_await and callbacks on one io_context"
timeout 30 "${examples}/conn_req_new/conn_req_new_example" "${addr}" "${port:-7204}" ||
  failures=$((failures + 1))
echo "-- C: librpma's blocking API"
timeout 30 "${examples}/conn_req_new/conn_req_new_c" "${addr}" "${port:-7204}" ||
  failures=$((failures + 1))

echo
echo "== 2. A connection with a \"hello\" each way: server and client as two processes"
for flavour in coroutine callback c; do
  case "${flavour}" in
    coroutine) title="co_await (C++20 coroutines, asio::use_awaitable)" ;;
    callback) title="callbacks (C++ completion handlers)" ;;
    c) title="C (librpma's API, non-blocking fds and poll)" ;;
  esac
  echo
  echo "-- ${title}: examples/connection/${flavour}/"
  if ! examples/connection/run-pair.sh "${examples}/connection/connection_${flavour}_server" \
    "${examples}/connection/connection_${flavour}_client" "${addr}" ${port:+"${port}"}; then
    failures=$((failures + 1))
  fi
done

echo
if [[ ${failures} -eq 0 ]]; then
  echo "== demo: every step succeeded"
else
  echo "== demo: ${failures} step(s) FAILED (see above)"
  exit 1
fi
