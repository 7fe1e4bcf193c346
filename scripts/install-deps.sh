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
  # bench/syscalls.sh: per-operation syscalls, context switches and CPU time (perf);
  # bench/conn_syscalls.sh: syscalls per connection setup (strace);
  # and the baselines an RDMA engineer would use: sockperf (TCP), perftest (ib_*_lat),
  # rdma-core's cmtime (connection setup, bench/rxe-compare.sh)
  strace linux-perf sockperf perftest rdmacm-utils
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
  # fio's librpma engines from Debian's source package (test/thirdparty/fio.sh): dpkg-source
  # unpacks it; the engines need libpmem and protobuf-c
  dpkg-dev libpmem-dev libprotobuf-c-dev
)

# `apt-get source fio` needs a deb-src entry for Debian's archive; add one for this release
# when apt knows no source package yet.
need_sources=0
# (The output taken whole: `| grep -q` under pipefail fails when grep stops reading first.)
if [[ $'\n'"$(apt-cache showsrc fio 2>/dev/null || true)" != *$'\nPackage: fio'* ]]; then
  need_sources=1
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null || true)"
  if [[ "${status}" != "install ok installed" ]]; then
    missing+=("${pkg}")
  fi
done

if [[ ${#missing[@]} -eq 0 && ${need_sources} -eq 0 ]]; then
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

if [[ ${need_sources} -eq 1 ]]; then
  codename="$(. /etc/os-release && echo "${VERSION_CODENAME}")"
  echo "install-deps: adding deb-src for Debian ${codename} (/etc/apt/sources.list.d/arpma-deb-src.sources)"
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
    "${codename}" /usr/share/keyrings/debian-archive-keyring.gpg |
    "${SUDO[@]}" tee /etc/apt/sources.list.d/arpma-deb-src.sources >/dev/null
fi
"${SUDO[@]}" apt-get update
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "install-deps: installing ${missing[*]}"
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
fi
