#!/usr/bin/env bash
# Runs inside the Soft-RoCE guest: the integration tests and the examples of
# the build in BUILD_DIR, on the verbs provider (rdma-core, rxe0),
# the librpma 1.2 comparison of test/compat/ and fio's librpma engines.
#
#   test/vm/run-in-rxe-vm.sh [--siw] -- test/vm/in-guest.sh build/default [--packages DEB_DIR] [--full]
#                                                 [--integration-only]
#
# --full: also the baselines, which check the harness rather than arpma: fio's librpma engines
# on Debian's librpma 1.2, and arpma-perf on the device (scripts/test.sh --nodes; CI's --rxe
# leaves them out for time).
#
# --packages: last, installs arpma's Debian packages of DEB_DIR over Debian's librpma (the
# guest's root is a throw-away overlay) and runs librpma programs and fio on them unchanged
# (test/package/deb.sh install-check).
#
# --integration-only: the integration tests alone (CI's Soft-iWARP guest, run-in-rxe-vm.sh --siw:
# what iWARP does differently is asserted there, docs/compatibility.md).
#
# --reorder: the integration tests with 2 ms ± 2 ms of netem delay on the device the test
# address routes through (loopback), so segments arrive late and out of order. CI's Soft-iWARP
# guest runs so: it exposes the tests that relied on one side's event coming before the other's
# (docs/compatibility.md, "iWARP": the passive side's ESTABLISHED comes first there).
#
# Exit status: 0 when every step passed, 1 otherwise, 2 on bad usage.
set -uo pipefail

usage() {
  echo "usage: $0 BUILD_DIR [--packages DEB_DIR] [--full] [--integration-only] [--reorder] (inside the guest: test/vm/run-in-rxe-vm.sh -- $0 BUILD_DIR)" >&2
  exit 2
}

debs=
full=0
integration_only=0
reorder=0
args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --packages)
      [[ $# -ge 2 && -n $2 ]] || usage # not a run without the packages
      debs=$2
      shift 2
      ;;
    --full)
      full=1
      shift
      ;;
    --integration-only)
      integration_only=1
      shift
      ;;
    --reorder)
      reorder=1
      shift
      ;;
    *)
      args+=("$1")
      shift
      ;;
  esac
done
set -- "${args[@]}"
[[ $# -eq 1 && -d $1 && (-z $debs || -d $debs) ]] || usage
if [[ -z ${RXE_VM_IP:-} ]]; then
  echo "$0: RXE_VM_IP is not set; run me through test/vm/run-in-rxe-vm.sh" >&2
  exit 2
fi
build=$(cd -- "$1" && pwd -P)
export ARPMA_PROVIDER=verbs ARPMA_TEST_ADDR=$RXE_VM_IP
echo "in-guest: $RXE_VM_DEV at $RXE_VM_IP (GID index $RXE_VM_GID_INDEX), ARPMA_PROVIDER=verbs, build $build"

# ctest writes its logs under $build/Testing, which is the host's (shared
# read-write); an outer ctest (label rxe) may be writing there right now.
mkdir -p "$build/Testing" && mount -t tmpfs tmpfs "$build/Testing"

# One test per guest CPU (2 on a 2-core host): the integration step takes 77 s instead of 145.
jobs=$(nproc)
failed=()
step() {
  local name=$1 t0=$EPOCHREALTIME rc=0
  shift
  printf '\n---- %s\n' "$name"
  "$@" || rc=$?
  printf -- '---- %s: %s (%.1f s)\n' "$name" "$([[ $rc -eq 0 ]] && echo passed || echo "FAILED, exit status $rc")" \
    "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')"
  [[ $rc -eq 0 ]] || failed+=("$name")
}

finish() {
  echo
  if [[ ${#failed[@]} -gt 0 ]]; then
    echo "in-guest: FAILED: ${failed[*]}"
    exit 1
  fi
  echo "in-guest: all steps passed on rdma-core ($RXE_VM_DEV)"
  exit 0
}

examples=$build/examples/conn_req_new
netem_dev=
if [[ $reorder -eq 1 ]]; then
  netem_dev=$(ip -o route get "$RXE_VM_IP" | sed -n 's/.* dev \([^ ]*\).*/\1/p')
  step "netem delay 2ms 2ms on ${netem_dev:-?}" tc qdisc add dev "${netem_dev:-lo}" root netem delay 2ms 2ms
fi
step "ctest -L integration" ctest --test-dir "$build" -L integration --no-tests=error --output-on-failure -j "$jobs"
[[ -z $netem_dev ]] || tc qdisc del dev "$netem_dev" root
[[ $integration_only -eq 0 ]] || finish
# The connection examples, server and client as two processes, every flavour (run-pair.sh
# takes the address from ARPMA_TEST_ADDR).
# On iWARP (siw0) the ping-pong and stream examples are left out: they exist to show immediate
# data, which RDMAP does not carry (the post fails with the provider's error; docs/compatibility.md).
not_on_iwarp=()
if [[ $RXE_VM_DEV == siw* ]]; then
  not_on_iwarp=(-E '^examples\.(datapath\.ping_pong|stream)\.')
  printf '\n---- on %s: the ping-pong and stream examples are not run (immediate data)\n' "$RXE_VM_DEV"
fi
step "ctest -L examples" ctest --test-dir "$build" -L examples --no-tests=error --output-on-failure \
  -j "$jobs" "${not_on_iwarp[@]}"
step "conn_req_new_c" "$examples/conn_req_new_c" "$RXE_VM_IP" 7204
# 20 requests in flight on iWARP: siw (Linux 6.1) runs out of queue pages at ~48 per process
# (docs/compatibility.md).
in_flight=100
[[ $RXE_VM_DEV != siw* ]] || in_flight=20
step "conn_req_new_example" "$examples/conn_req_new_example" "$RXE_VM_IP" 7204 "$in_flight"
# IPv6 on rxe (issue 20, item 3): rxevm0 also has a ULA address, whose RoCEv2 GID rxe0 lists.
# Connection setup, the data path and the C API's lifecycle (25 of the integration tests: CI's
# 45 minutes), and the C example; all 138 integration and example tests passed here by hand
# (closing note, stop 30), and every one runs over IPv6 on the host's soft provider.
if [[ -n ${RXE_VM_IP6:-} ]]; then
  step "integration tests over IPv6 ($RXE_VM_IP6)" env ARPMA_TEST_ADDR="$RXE_VM_IP6" \
    ctest --test-dir "$build" -L integration --no-tests=error --output-on-failure -j "$jobs" \
    -R '^(conn_req_integration|datapath|datapath_capi|cq_integration|lifecycle_capi)\.'
  step "conn_req_new_c over IPv6" "$examples/conn_req_new_c" "$RXE_VM_IP6" 7204
else
  failed+=("IPv6: RXE_VM_IP6 is not set (test/vm/run-in-rxe-vm.sh gives it)")
fi
# Differential test against Debian's librpma 1.2: the programs of $build/test/compat (built on
# the host with librpma-dev), both variants on rxe0; outputs under $build/test/compat/out/guest.
abi=()
[[ -e $build/librpma-abi/librpma.so.0 ]] && abi=(--abi "$build/librpma-abi")
step "compat: librpma 1.2 vs arpma" "$(dirname -- "${BASH_SOURCE[0]}")/../compat/run.sh" --bin-dir "$build/test/compat" "${abi[@]}"
# fio's librpma engines, built from Debian's source on the host (test/thirdparty/fio.sh build;
# scripts/test.sh does it), the same binary on arpma and (--full) on Debian's librpma 1.2; 2 MiB
# per job, as the guest emulates its CPU.
fio_sh=$(dirname -- "${BASH_SOURCE[0]}")/../thirdparty/fio.sh
if compgen -G "$build/thirdparty/fio-[0-9]*/fio" >/dev/null; then
  step "fio: librpma engines on arpma (verbs)" "$fio_sh" run "$build" --lib arpma --addr "$RXE_VM_IP" --io-size 2097152
  if [[ $full -eq 1 ]]; then
    step "fio: librpma engines on Debian's librpma 1.2" "$fio_sh" run "$build" --lib debian --addr "$RXE_VM_IP" --io-size 2097152
  else
    printf '\n---- fio on Debian'"'"'s librpma 1.2 (baseline): with --full (scripts/test.sh --nodes)\n'
  fi
else
  printf '\n---- fio: not built, not run (on the host: test/thirdparty/fio.sh build %s)\n' "$build"
fi
# arpma-perf on the device (--full): 64 B write and send round trips, writes 16 deep.
# shellcheck disable=SC2317 # called through step
perf_on_device() {
  local perf=$build/tools/arpma-perf/arpma-perf rc=0 run server
  timeout 300 "$perf" server --addr "$RXE_VM_IP" --port 7398 --clients 3 --provider verbs \
    </dev/null >/dev/null &
  server=$!
  for run in "--op write --test lat --iters 2000" "--op send --test lat --iters 2000" \
    "--op write --test bw --qd 16 --iters 20000"; do
    local ok=0 try
    for try in 1 2 3 4 5 6 7 8 9 10; do # until the server listens
      # shellcheck disable=SC2086 # run is a list of options
      if timeout 120 "$perf" client --addr "$RXE_VM_IP" --port 7398 --provider verbs \
        --size 64 $run </dev/null; then
        ok=1
        break
      fi
      sleep "$try"
    done
    [[ $ok -eq 1 ]] || rc=1
  done
  wait "$server" || rc=1
  return "$rc"
}
[[ $full -eq 0 ]] || step "arpma-perf on $RXE_VM_DEV" perf_on_device
# Fault injection on rdma-core (test/fault/run.py): only with a build that has the fault points
# (ARPMA_FAULT_INJECTION, the asan preset), so not in CI's guest run (build/default). A subset:
# the guest has one emulated CPU. All of it: test/vm/run-in-rxe-vm.sh -- test/fault/run.py
# --build build/asan
if grep -q '^ARPMA_FAULT_INJECTION:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  step "fault injection (C examples, verbs)" "$(dirname -- "${BASH_SOURCE[0]}")/../fault/run.py" \
    --build "$build" --c-only --jobs 2 --quiet-ms 5000 --only '^(connection_c|write_flush_c|conn_req_new_c)$'
else
  printf '\n---- fault injection: skipped (%s is built without ARPMA_FAULT_INJECTION)\n' "$build"
fi
# Last: it replaces Debian's librpma, which the steps above compare with.
if [[ -n $debs ]]; then
  step "Debian packages installed over Debian's librpma" \
    "$(dirname -- "${BASH_SOURCE[0]}")/../package/deb.sh" install-check "$debs" "$build"
fi

finish
