#!/usr/bin/env bash
# Debian packages of arpma (cmake/ArpmaPackage.cmake), made and checked.
#
#   test/package/deb.sh build [BUILD_DIR]
#       on the host: configures and builds the package preset into BUILD_DIR (default
#       build/package), runs cpack, then checks each .deb without installing it: its control
#       fields (Provides/Conflicts/Replaces of the two packages that replace Debian's librpma0
#       and librpma-dev), its files, the drop-in's exported symbols; then unpacks all of them
#       into a scratch root and runs test/consumer/run.sh against that tree (find_package,
#       pkg-config, -lrpma, man pages, headers, arpma-perf).
#   test/package/deb.sh install-check DEB_DIR BUILD_DIR
#       inside the Soft-RoCE guest (its root is a throw-away overlay; test/vm/in-guest.sh runs
#       it last): installs every .deb of DEB_DIR with dpkg over Debian's librpma0 and
#       librpma-dev, checks that dpkg removed them and that the system's librpma.so.0 is now
#       the drop-in's, then runs, unchanged, programs built against Debian's librpma: the
#       compat programs of BUILD_DIR/test/compat (test/compat/run.sh --installed) and three of
#       fio's librpma pairs (test/thirdparty/fio.sh run --lib system); last it builds a C program
#       with `cc $(pkg-config --cflags --libs librpma)` against the installed libarpma-dev.
#
# Exit status: 0 passed, 1 a check failed, 2 bad usage.
set -euo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd -- "$here/../.." && pwd -P)
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
libdir=usr/lib/$multiarch

log() { printf 'deb: %s\n' "$*"; }
fail() {
  printf 'deb: FAILED: %s\n' "$*" >&2
  exit 1
}
usage() {
  sed -n '2,19{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
  exit 2
}

# field DEB NAME: one control field of a .deb (empty when absent)
field() { dpkg-deb -f "$1" "$2" 2>/dev/null || true; }

expect_field() { # DEB NAME VALUE
  local got
  got=$(field "$1" "$2")
  [[ $got == "$3" ]] || fail "$(basename -- "$1"): $2 is '$got', expected '$3'"
}

expect_file() { # DEB PATH: the .deb holds ./PATH (file or link)
  # grep reads to the end (no -q): an early exit would SIGPIPE dpkg-deb and fail the pipeline.
  dpkg-deb -c "$1" | awk '{ print $6 }' | grep -x "./$2" >/dev/null ||
    fail "$(basename -- "$1") has no /$2"
}

deb_of() { # DEB_DIR PACKAGE
  local f
  f=$(compgen -G "$1/$2_*.deb" | head -n 1 || true)
  [[ -n $f ]] || fail "no $2_*.deb in $1"
  echo "$f"
}

check_debs() { # DEB_DIR: control fields and files, no install
  local dir=$1 version runtime dev dropin tools provides
  runtime=$(deb_of "$dir" libarpma0)
  dev=$(deb_of "$dir" libarpma-dev)
  dropin=$(deb_of "$dir" librpma0-arpma)
  tools=$(deb_of "$dir" arpma-tools)
  version=$(field "$runtime" Version)
  provides=$(sed -n 's/^set(ARPMA_RPMA_API_VERSION \(.*\))$/\1/p' "$repo/cmake/ArpmaInstall.cmake")
  for deb in "$runtime" "$dev" "$dropin" "$tools"; do
    printf '\n%s\n' "$(basename -- "$deb")"
    dpkg-deb -f "$deb" Package Version Architecture Depends Provides Conflicts Replaces | sed 's/^/  /'
    dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { print "  " $6 ($7 == "->" ? " -> " $8 : "") }'
    expect_field "$deb" Version "$version"
  done
  echo
  expect_file "$runtime" "$libdir/libarpma.so.0"
  if dpkg-deb -c "$runtime" | grep '\.so$\|/include/' >/dev/null; then
    fail "libarpma0 ships development files"
  fi
  expect_field "$dropin" Provides "librpma0 (= $provides)"
  expect_field "$dropin" Conflicts librpma0
  expect_field "$dropin" Replaces librpma0
  expect_file "$dropin" "$libdir/librpma.so.0"
  expect_field "$dev" Provides "librpma-dev (= $provides)"
  expect_field "$dev" Conflicts librpma-dev
  expect_field "$dev" Replaces librpma-dev
  for f in usr/include/librpma.h usr/include/arpma/connection.hpp "$libdir/librpma.so" \
    "$libdir/libarpma.so" "$libdir/pkgconfig/librpma.pc" "$libdir/pkgconfig/arpma.pc" \
    "$libdir/cmake/arpma/arpmaConfig.cmake" usr/share/man/man3/rpma_conn_req_new.3 \
    usr/share/man/man7/librpma.7; do
    expect_file "$dev" "$f"
  done
  [[ $(field "$dev" Depends) == *"libarpma0 (= $version)"*"librpma0-arpma (= $version)"* ]] ||
    fail "libarpma-dev does not depend on libarpma0 and librpma0-arpma of its version"
  expect_file "$tools" usr/bin/arpma-perf
  [[ $(field "$tools" Depends) == *libarpma0* ]] || fail "arpma-tools does not depend on libarpma0"
  log "control fields and files as expected (version $version, librpma API $provides)"
}

cmd_build() {
  local build=${1:-$repo/build/package}
  [[ $# -le 1 ]] || usage
  cd "$repo"
  if [[ $build == "$repo/build/package" ]]; then
    cmake --preset package
    cmake --build --preset package -j "$(nproc)"
  else
    cmake -S "$repo" -B "$build" --preset package
    cmake --build "$build" -j "$(nproc)"
  fi
  rm -rf "$build/deb"
  cpack --config "$build/CPackConfig.cmake" -B "$build/deb"
  check_debs "$build/deb"
  root=$(mktemp -d "${TMPDIR:-/tmp}/arpma-deb-root.XXXXXX") # global: the EXIT trap reads it
  trap 'rm -rf "$root"' EXIT
  for deb in "$build"/deb/*.deb; do dpkg-deb -x "$deb" "$root"; done
  "$repo/test/compat/abi_exports.sh" "$root/$libdir/librpma.so.0" "$repo/src/capi/librpma.map"
  log "unpacked into $root: test/consumer/run.sh --prefix $root/usr"
  "$repo/test/consumer/run.sh" --prefix "$root/usr"
  log "PASSED: $(cd "$build/deb" && echo *.deb)"
}

cmd_install_check() {
  [[ $# -eq 2 ]] || usage
  local debs build owner before so work
  debs=$(cd -- "$1" && pwd -P)
  build=$(cd -- "$2" && pwd -P)
  [[ -n ${RXE_VM_IP:-} ]] || fail "install-check changes the system's packages: only inside the guest (test/vm/run-in-rxe-vm.sh)"
  before=$(dpkg-query -W -f '${Package} ${Version} ${Status}\n' librpma0 librpma-dev 2>/dev/null || true)
  log "before: ${before//$'\n'/; }"
  # man-db's trigger rebuilds the whole man index, which takes tens of seconds on the guest's
  # emulated CPU; the guest's root is thrown away, so switch it off there.
  rm -f /var/lib/man-db/auto-update
  local t0=$SECONDS
  dpkg -i "$debs"/*.deb
  log "dpkg -i: $((SECONDS - t0)) s"
  for pkg in librpma0 librpma-dev; do
    if [[ $(dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null || true) == *' installed' ]]; then
      fail "$pkg is still installed"
    fi
  done
  dpkg --audit || fail "dpkg --audit reports broken packages"
  so=/$libdir/librpma.so.0
  owner=$(dpkg -S "$so" | cut -d: -f1)
  [[ $owner == librpma0-arpma ]] || fail "$so belongs to '$owner'"
  log "after: $so -> $(readlink -f "$so") from $owner; $(dpkg-query -W -f '${Package} ${Version}, ' \
    libarpma0 libarpma-dev librpma0-arpma arpma-tools)"
  "$repo/test/compat/run.sh" --bin-dir "$build/test/compat" --installed --out "$build/test/compat/out/installed"
  if compgen -G "$build/thirdparty/fio-[0-9]*/fio" >/dev/null; then
    # Three pairs, one per engine and direction: the whole matrix ran on the same library
    # (by LD_LIBRARY_PATH) a step earlier; here the point is the installed package.
    "$repo/test/thirdparty/fio.sh" run "$build" --lib system --addr "$RXE_VM_IP" --io-size 2097152 \
      --only '^(apm-write-qd1|apm-read-qd16|gpspm-write-qd16)$'

  else
    fail "fio is not built in $build (test/thirdparty/fio.sh build $build)"
  fi
  work=$(mktemp -d)
  # shellcheck disable=SC2046 # pkg-config prints a list of words
  cc -std=c11 -Wall -Wextra -Werror -o "$work/c_consumer" "$repo/test/consumer/c/main.c" \
    $(pkg-config --cflags --libs librpma)
  log "cc \$(pkg-config --cflags --libs librpma) against the installed libarpma-dev: $(pkg-config --modversion librpma)," \
    "librpma.so.0 => $(ldd "$work/c_consumer" | awk '$1 == "librpma.so.0" { print $3 }')"
  ARPMA_PROVIDER=soft "$work/c_consumer"
  rm -rf "$work"
  log "PASSED: installed over Debian's librpma; librpma programs and fio ran unchanged"
}

case ${1:-} in
  build) shift; cmd_build "$@" ;;
  install-check) shift; cmd_install_check "$@" ;;
  *) usage ;;
esac
