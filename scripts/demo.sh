#!/usr/bin/env bash
# The main job: builds the default preset and runs the conn_req_new example,
# which performs rpma_conn_req_new in three flavours (co_await, callback,
# blocking C) and prints the outcome. Extra arguments replace the defaults
# "127.0.0.1 7204".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-deps.sh

if [[ ! -f build/default/CMakeCache.txt ]]; then
  cmake --preset default
fi
cmake --build --preset default -j "$(nproc)"

examples=build/default/examples/conn_req_new
if [[ $# -eq 0 ]]; then
  set -- 127.0.0.1 7204
fi
echo "== rpma_conn_req_new on ${1}:${2} (provider: ${ARPMA_PROVIDER:-auto}; auto = verbs when an RDMA device exists, else soft)"
echo "-- C++: co_await and callbacks on one io_context"
"${examples}/conn_req_new_example" "$@"
echo "-- C: librpma's blocking API"
"${examples}/conn_req_new_c" "$1" "$2"
