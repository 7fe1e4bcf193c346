#!/usr/bin/env bash
# Issue 6's benchmark, inside the Soft-RoCE guest: the same librpma program
# (bench/librpma_compare.c, built against Debian's librpma) on librpma and on
# arpma's librpma.so.0 drop-in, plus arpma's connections in flight
# (bench/conn_setup_bench); prints the figures and the ratios.
#
#   test/vm/run-in-rxe-vm.sh -- bench/rxe-compare.sh build/default
set -euo pipefail
build=$(cd -- "${1:?usage: $0 BUILD_DIR}" && pwd -P)
addr=${RXE_VM_IP:?run me inside the guest: test/vm/run-in-rxe-vm.sh -- $0 BUILD_DIR}
export ARPMA_PROVIDER=verbs ARPMA_TEST_ADDR=$addr
prog=$build/bench/librpma_compare
n_lat=${N_LAT:-2000}
n_conn=${N_CONN:-100}
run() { # LIBDIR WHAT N PORT
  if [[ -n $1 ]]; then LD_LIBRARY_PATH=$1 timeout 300 "$prog" "$addr" "$4" "$2" "$3"; else timeout 300 "$prog" "$addr" "$4" "$2" "$3"; fi
}
lat_l=$(run "" latency "$n_lat" 7311 | awk '{ print $3 }')
lat_a=$(run "$build/librpma-abi" latency "$n_lat" 7312 | awk '{ print $3 }')
con_l=$(run "" connect "$n_conn" 7313 | awk '{ print $2 }')
con_a=$(run "$build/librpma-abi" connect "$n_conn" 7314 | awk '{ print $2 }')
echo "64 B write round trip, median us: librpma $lat_l, arpma C API $lat_a, ratio $(awk -v a="$lat_a" -v l="$lat_l" 'BEGIN { printf "%.2f", a / l }')"
echo "sequential connections/s (rpma_conn_req_new + connect + ESTABLISHED + disconnect): librpma $con_l, arpma C API $con_a"
if [[ -x $build/bench/conn_setup_bench ]]; then
  inflight=$(timeout 300 "$build/bench/conn_setup_bench" "$addr" 7315 "$n_conn" 64 | awk '{ print $2 }')
  echo "arpma, 64 connections in flight on one thread: $inflight connections/s; ratio to librpma's sequential loop: $(awk -v a="$inflight" -v l="$con_l" 'BEGIN { printf "%.2f", a / l }')"
fi
