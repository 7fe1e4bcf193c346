#!/usr/bin/env bash
# Installs dependencies, then configures, builds and tests arpma with each
# CMake preset in ARPMA_TEST_PRESETS (default: "default asan tsan").
#
# The default preset also builds fio from Debian's source package against an
# install of arpma and runs its librpma engines on the soft provider
# (test/thirdparty/fio.sh), and makes the Debian packages (package preset,
# test/package/deb.sh build), checked unpacked.
#
# --rxe: then also runs the integration tests, the conn_req_new examples and
# fio's librpma engines (on arpma and on Debian's librpma) of build/default
# (built first if "default" is not among the presets) on the verbs provider
# inside a QEMU guest with Soft-RoCE (test/vm/), i.e. on real rdma-core; last,
# in the same guest, installs the Debian packages over Debian's librpma and
# runs librpma programs and fio on them unchanged; then the integration tests again in a
# guest with Soft-iWARP (siw0: run-in-rxe-vm.sh --siw); then two guests joined by a
# virtual link run every example pair (server in one, client in the other), the C
# examples with one side on Debian's librpma and the other on arpma (both ways),
# arpma-perf between them, and the two-process integration tests with their peer process
# in the other guest (test/vm/run-two-nodes.sh). A guest that cannot be
# started fails the run (no skipping).
#
# The persistence test across a power cut (test/vm/power-cut.sh) runs last in --rxe: node A's
# QEMU killed once per provider (soft: msync flush; verbs: GPSPM).
#
# --nodes: the two-node part at full size (implies the guest steps of --rxe): the guest's
# baselines too (fio on Debian's librpma, arpma-perf: in-guest.sh --full), the whole guest
# suite on Soft-iWARP (examples, compat against librpma, fio, arpma-perf: not only the
# integration tests), the two-node suite with all five
# IPv6 pairs (two-nodes-suite.sh --full), then 10 power cuts per provider and a control run of
# each (writes never flushed).
#
# --fuzz: then also runs scripts/fuzz.sh (every libFuzzer harness for
# ARPMA_FUZZ_SECONDS each, default 60; needs clang). Not in CI's command.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

rxe=0
nodes=0
fuzz=0
for arg in "$@"; do
  case "${arg}" in
    --rxe) rxe=1 ;;
    --nodes) rxe=1 nodes=1 ;;
    --fuzz) fuzz=1 ;;
    -h | --help)
      echo "usage: scripts/test.sh [--rxe] [--nodes] [--fuzz]   (presets: ARPMA_TEST_PRESETS, default \"default asan tsan\")"
      exit 0
      ;;
    *)
      echo "scripts/test.sh: unknown argument '${arg}' (usage: scripts/test.sh [--rxe] [--nodes] [--fuzz])" >&2
      exit 2
      ;;
  esac
done

# Each step's line says when it started (seconds since the script did): CI's 45 minutes are
# measured per step from these.
banner() {
  printf '\n==== %s ==== [%d s]\n' "$*" "${SECONDS}"
}

# rxe_verdict RC RUNNER: a guest that could not run (125) fails the run as a harness failure,
# never a skip; any other failure fails it with its status.
rxe_verdict() {
  if [[ $1 -eq 125 ]]; then
    echo "scripts/test.sh: HARNESS FAILURE: the Soft-RoCE guest could not be run" \
      "($2 exit status 125, reason above); not skipped" >&2
    exit 125
  elif [[ $1 -ne 0 ]]; then
    echo "scripts/test.sh: [rxe] FAILED ($2, exit status $1)" >&2
    exit "$1"
  fi
}

presets="${ARPMA_TEST_PRESETS:-default asan tsan}"
jobs="$(nproc)"

banner "install dependencies"
scripts/install-deps.sh

banner "layers (scripts/layers.sh: no include against capi > core > provider > support)"
scripts/layers.sh

passed=()
for preset in ${presets}; do
  banner "[${preset}] configure"
  cmake --preset "${preset}"
  banner "[${preset}] build (-j ${jobs})"
  cmake --build --preset "${preset}" -j "${jobs}"
  banner "[${preset}] test (-j ${jobs})"
  ctest --preset "${preset}" -j "${jobs}"
  if [[ ${preset} == default ]]; then
    # The same connections, data path and example pairs over IPv6 (the soft provider on ::1).
    banner "[default] integration tests and examples over IPv6 (ARPMA_TEST_ADDR=::1)"
    ARPMA_TEST_ADDR=::1 ctest --preset default -L 'integration|examples' -j "${jobs}"
    banner "[default] fio's librpma engines (Debian's fio source, unchanged) on arpma, soft provider"
    test/thirdparty/fio.sh build build/default
    ARPMA_PROVIDER=soft test/thirdparty/fio.sh run build/default
    banner "[package] Debian packages: cpack, checked unpacked (test/package/deb.sh build)"
    test/package/deb.sh build
  fi
  passed+=("${preset}")
done

if [[ ${rxe} -eq 1 ]]; then
  if [[ " ${passed[*]} " != *" default "* ]]; then
    banner "[default] configure + build (for --rxe)"
    cmake --preset default
    cmake --build --preset default -j "${jobs}"
    test/thirdparty/fio.sh build build/default
    test/package/deb.sh build
  fi
  banner "[rxe] integration tests, examples, compat, fio, then the Debian packages installed (Soft-RoCE guest)"
  rxe_start=${SECONDS}
  rc=0
  # --nodes: the guests' full size (baselines, every IPv6 pair); empty otherwise.
  full_flag=
  [[ ${nodes} -eq 0 ]] || full_flag=--full
  # shellcheck disable=SC2086 # full_flag: one word or none
  test/vm/run-in-rxe-vm.sh --timeout 900 -- \
    test/vm/in-guest.sh build/default --packages build/package/deb ${full_flag} || rc=$?
  rxe_time=$((SECONDS - rxe_start))
  echo "[rxe] time taken: ${rxe_time} s"
  rxe_verdict "${rc}" "test/vm/run-in-rxe-vm.sh"
  banner "[siw] integration tests on Soft-iWARP (siw0), iWARP's differences asserted, segments reordered"
  siw_start=${SECONDS}
  rc=0
  # --nodes: the whole guest suite on siw0 as on rxe0; CI: the integration tests (its time),
  # with netem reordering loopback's segments (in-guest.sh --reorder).
  siw_part=(--integration-only --reorder)
  [[ ${nodes} -eq 0 ]] || siw_part=(--full)
  test/vm/run-in-rxe-vm.sh --siw --timeout 1200 -- \
    test/vm/in-guest.sh build/default "${siw_part[@]}" || rc=$?
  siw_time=$((SECONDS - siw_start))
  echo "[siw] time taken: ${siw_time} s"
  rxe_verdict "${rc}" "test/vm/run-in-rxe-vm.sh --siw"
  banner "[two nodes] example pairs and arpma-perf between two Soft-RoCE guests on one link"
  nodes_start=${SECONDS}
  rc=0
  test/vm/run-two-nodes.sh --timeout 600 \
    --server "test/vm/two-nodes-suite.sh server build/default ${full_flag}" \
    --client "test/vm/two-nodes-suite.sh client build/default ${full_flag}" || rc=$?
  nodes_time=$((SECONDS - nodes_start))
  echo "[two nodes] time taken: ${nodes_time} s"
  rxe_verdict "${rc}" "test/vm/run-two-nodes.sh"
  kills=1
  [[ ${nodes} -eq 0 ]] || kills=10
  banner "[power cut] node A's QEMU killed ${kills} times per provider; every flushed record survives"
  cut_start=${SECONDS}
  for provider in soft verbs; do
    rc=0
    test/vm/power-cut.sh --provider "${provider}" --kills "${kills}" build/default || rc=$?
    rxe_verdict "${rc}" "test/vm/power-cut.sh --provider ${provider}"
    if [[ ${nodes} -eq 1 ]]; then
      test/vm/power-cut.sh --provider "${provider}" --kills 1 --control build/default || rc=$?
      rxe_verdict "${rc}" "test/vm/power-cut.sh --provider ${provider} --control"
    fi
  done
  cut_time=$((SECONDS - cut_start))
  echo "[power cut] time taken: ${cut_time} s"
fi

if [[ ${fuzz} -eq 1 ]]; then
  banner "[fuzz] every libFuzzer harness, ${ARPMA_FUZZ_SECONDS:-60} s each"
  scripts/fuzz.sh "${ARPMA_FUZZ_SECONDS:-60}"
fi

banner "summary"
echo "all presets passed: ${passed[*]}"
if [[ ${rxe} -eq 1 ]]; then
  echo "Soft-RoCE guest (verbs provider, rdma-core): passed in ${rxe_time} s"
  echo "Soft-iWARP guest (integration tests, segments reordered): passed in ${siw_time} s"
  echo "two Soft-RoCE guests on one link: passed in ${nodes_time} s"
  echo "power cuts (${kills} per provider): no flushed record lost, ${cut_time} s"
fi
if [[ ${fuzz} -eq 1 ]]; then
  echo "fuzz: every harness passed (${ARPMA_FUZZ_SECONDS:-60} s each)"
fi
