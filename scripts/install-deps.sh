#!/usr/bin/env bash
# Installs every Debian package that building and testing arpma needs.
# Idempotent and non-interactive: when everything is already installed it does
# not touch apt at all.
set -euo pipefail

PACKAGES=(
  # toolchain and build system
  build-essential cmake ninja-build pkg-config g++
  # libraries arpma links against
  libboost1.81-dev librdmacm-dev libibverbs-dev
  # rdma-core user-space providers and tools (rxe/siw, ibv_devices, ...)
  rdma-core
  # unit tests and benchmarks
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  # bench/run.sh: JSON to plot data (python3), PNG plots without X
  gnuplot-nox python3
  # bench/syscalls.sh: per-operation syscalls (strace), context switches and CPU time (perf),
  # and the baselines an RDMA engineer would use: sockperf (TCP), perftest (ib_*_lat)
  strace linux-perf sockperf perftest
  # test/fault/run.py: the stacks of a process that hung, in the failure report
  gdb
  # formatting and linting (scripts/lint.sh)
  clang-format clang-tidy
  # sanitizer runtimes for clang builds (the asan/tsan presets also work with g++)
  libclang-rt-14-dev
  # Soft-RoCE guest for the tests on real rdma-core (test/vm/run-in-rxe-vm.sh,
  # scripts/test.sh --rxe): QEMU, initramfs tools, rxe0 setup and its provider
  qemu-system-x86 busybox-static iproute2 kmod cpio xz-utils
  ibverbs-providers rdma-core ibverbs-utils
  # API reference: `cmake --build <build> --target docs` (cmake/ArpmaDocs.cmake; without
  # Doxygen the target only prints a message)
  doxygen
  # librpma 1.2, the library arpma replaces: differential tests (test/compat/)
  librpma-dev
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null || true)"
  if [[ "${status}" != "install ok installed" ]]; then
    missing+=("${pkg}")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "all dependencies present"
  exit 0
fi

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "install-deps: not root and sudo not found; cannot install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
"${SUDO[@]}" apt-get update
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
