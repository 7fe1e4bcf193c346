#!/usr/bin/env bash
# Differential test of arpma's C API against Debian's librpma 1.2 (issue 6, item 3).
#
#   test/compat/run.sh                 build both variants into build/compat, run them here
#                                      (device section skipped: see below), compare
#   test/compat/run.sh --guest         build here, then run and compare inside a Soft-RoCE
#                                      guest (test/vm/run-in-rxe-vm.sh), device section included
#
# Options:
#   --bin-dir DIR       use the programs already built in DIR (DIR/librpma/, DIR/arpma/); no
#                       build (what test/vm/in-guest.sh and ctest use)
#   --arpma-build DIR   link the arpma library of that build (DIR/src/libarpma.a) instead of
#                       building one in build/compat
#   --out DIR           where the outputs go (default: BIN_DIR/out/host or BIN_DIR/out/guest)
#   --abi DIR           also run each librpma-built program with LD_LIBRARY_PATH=DIR, where
#                       arpma's librpma.so.0 drop-in is (src/CMakeLists.txt, ARPMA_LIBRPMA_ABI):
#                       its output must equal the arpma variant's, line for line
#   --installed         the system's librpma.so.0 is arpma's drop-in package (inside the guest,
#                       after test/package/deb.sh install-check installed it over Debian's
#                       librpma0): the librpma-built programs run unchanged, without
#                       LD_LIBRARY_PATH, and each output must equal the arpma variant's; there
#                       is no librpma 1.2 reference left to compare with
#
# Every test/compat/*.c program runs once linked with librpma and once with arpma; stdout (one
# line per check) is compared after the lines listed in test/compat/expected-differences.txt
# are replaced by a marker on both sides. stderr (log messages, diagnostics) is kept next to
# the outputs but not compared.
#
# Device section: on the host Debian's librpma finds no RDMA device (every device call fails
# with RPMA_E_PROVIDER) while arpma uses its soft provider, so only the device-independent
# checks are compared there. Inside the guest (RXE_VM_IP set, as run-in-rxe-vm.sh does) both
# use rxe0: arpma with ARPMA_PROVIDER=verbs; the device section runs with
#   ADDR=$RXE_VM_IP  SILENT=another address of ADDR's /24 (with ARP turned on for the guest's
#   dummy netdev while the programs run, its resolution can only time out)
#   NO_ROUTE=192.0.2.1 (TEST-NET-1: no interface reaches it, resolution fails at once)
#
# Exit status: 0 no unexpected difference; 1 unexpected differences (the diff is printed);
# 2 bad usage; 3 build failure or missing programs; 125 the guest could not be run.
set -uo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd -- "$HERE/../.." && pwd -P)
EXPECTED=$HERE/expected-differences.txt
PROGRAMS=(compat_strings compat_log compat_conn_cfg compat_peer_cfg compat_device compat_lifecycle_args compat_lifecycle compat_datapath)

guest=0
bin_dir=
arpma_build=
out_dir=
abi_dir=
installed=0
usage() { sed -n '2,35{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --guest) guest=1; shift ;;
    --bin-dir) bin_dir=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
    --arpma-build) arpma_build=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
    --out) out_dir=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
    --abi) abi_dir=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
    --installed) installed=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

log() { printf 'compat: %s\n' "$*"; }
inside_guest=0
[[ -n ${RXE_VM_IP:-} ]] && inside_guest=1
if [[ $inside_guest -eq 1 && $guest -eq 0 ]]; then
  log "RXE_VM_IP is set (inside the Soft-RoCE guest): running the device section too (--guest)"
  guest=1
fi

# ---------------------------------------------------------------- build (host only)
if [[ -z $bin_dir ]]; then
  if [[ $inside_guest -eq 1 ]]; then
    echo "run.sh: inside the guest nothing is built; pass --bin-dir (built on the host)" >&2
    exit 2
  fi
  bin_dir=$REPO/build/compat
  if ! pkg-config --exists librpma; then
    echo "run.sh: librpma not found: apt-get install librpma-dev (scripts/install-deps.sh)" >&2
    exit 3
  fi
  cfg_args=(-S "$HERE" -B "$bin_dir")
  command -v ninja >/dev/null && [[ ! -f $bin_dir/CMakeCache.txt ]] && cfg_args+=(-G Ninja)
  if [[ -n $arpma_build ]]; then
    cfg_args+=("-DARPMA_BUILD_DIR=$(cd -- "$arpma_build" && pwd -P)")
  elif [[ -f $bin_dir/CMakeCache.txt ]]; then
    cfg_args+=(-DARPMA_BUILD_DIR=) # back to building arpma here if an earlier run linked another
  fi
  log "build: cmake ${cfg_args[*]}"
  t0=$SECONDS
  mkdir -p "$bin_dir" || exit 3
  if ! cmake "${cfg_args[@]}" >"$bin_dir/configure.log" 2>&1; then
    cat "$bin_dir/configure.log" >&2
    echo "run.sh: configuring $bin_dir failed" >&2
    exit 3
  fi
  if ! cmake --build "$bin_dir" -j "${COMPAT_JOBS:-$(nproc)}"; then
    echo "run.sh: building $bin_dir failed" >&2
    exit 3
  fi
  log "build: done in $((SECONDS - t0)) s"
fi
bin_dir=$(cd -- "$bin_dir" 2>/dev/null && pwd -P) || { echo "run.sh: no directory $bin_dir" >&2; exit 3; }
for p in "${PROGRAMS[@]}"; do
  for v in librpma arpma; do
    if [[ ! -x $bin_dir/$v/$p ]]; then
      echo "run.sh: $bin_dir/$v/$p is missing (built without librpma-dev? see test/compat/CMakeLists.txt)" >&2
      exit 3
    fi
  done
done
# each variant must be linked with its own library
# (ldd's output is read whole: grep -q would exit early and pipefail would see SIGPIPE)
if ! ldd "$bin_dir/librpma/compat_strings" | grep 'librpma\.so' >/dev/null; then
  echo "run.sh: $bin_dir/librpma/compat_strings is not linked with librpma.so" >&2
  exit 3
fi
if ldd "$bin_dir/arpma/compat_strings" | grep 'librpma\.so' >/dev/null; then
  echo "run.sh: $bin_dir/arpma/compat_strings is linked with librpma.so, not arpma" >&2
  exit 3
fi

# ---------------------------------------------------------------- hand over to the guest
if [[ $guest -eq 1 && $inside_guest -eq 0 ]]; then
  log "booting the Soft-RoCE guest to run the comparison there"
  t0=$SECONDS
  rc=0
  "$REPO/test/vm/run-in-rxe-vm.sh" --timeout 600 -- "$HERE/run.sh" --guest --bin-dir "$bin_dir" \
    ${out_dir:+--out "$out_dir"} ${abi_dir:+--abi "$abi_dir"} || rc=$?
  log "guest run: exit status $rc, $((SECONDS - t0)) s including the boot"
  exit $rc
fi

# ---------------------------------------------------------------- run
mode=host
[[ $guest -eq 1 ]] && mode=guest
out_dir=${out_dir:-$bin_dir/out/$mode}
mkdir -p "$out_dir" || exit 3
dev_args=()
if [[ $mode == guest ]]; then
  export ARPMA_PROVIDER=verbs
  addr=$RXE_VM_IP
  prefix=${addr%.*}
  last=${addr##*.}
  silent=$prefix.$((last == 254 ? 253 : 254))
  dev_args=("$addr" "$silent" 192.0.2.1 --device-names)
  # The guest's netdev is a dummy, which has IFF_NOARP: every neighbour of its subnet
  # "resolves" at once and nothing can time out. With ARP on, SILENT's resolution sends ARP
  # requests that no one answers, so it can only time out (the deadline paths of both
  # libraries). Restored on exit.
  netdev=$(ip -o -4 addr show 2>/dev/null | awk -v ip="$addr" '{ split($4, a, "/"); if (a[1] == ip) print $2 }')
  if [[ -n $netdev ]] && ip link set dev "$netdev" arp on; then
    trap 'ip link set dev "$netdev" arp off' EXIT
    log "guest: ARP on for $netdev while the programs run (SILENT resolution can only time out)"
  else
    log "guest: WARNING: cannot turn ARP on for the netdev of $addr: SILENT resolves at once"
  fi
  log "guest: ${RXE_VM_DEV:-rxe0} at $addr, ARPMA_PROVIDER=verbs; device section with" \
    "ADDR=$addr SILENT=$silent NO_ROUTE=192.0.2.1"
else
  log "host: DEVICE SECTION SKIPPED for both variants (librpma has no RDMA device here, arpma" \
    "would use its soft provider); comparing the device-independent checks only." \
    "Run 'test/compat/run.sh --guest' for the device section."
fi

# Tags select the entries of expected-differences.txt that have a "when:" line: the build
# writes them to BIN_DIR/compat-tags (arpma-debug: the arpma library was built without NDEBUG).
tags=" $mode "
[[ -f $bin_dir/compat-tags ]] && tags+="$(tr '\n' ' ' <"$bin_dir/compat-tags") "
log "tags:$tags"

# expected differences: blocks of "id:", "when:", "librpma:", "arpma:", "reason:" lines,
# separated by blank lines; a run of matching lines becomes one "[expected difference: ID]"
normalise() { # VARIANT FILE -> stdout
  awk -v variant="$1" -v tags="$tags" '
    function flush(   i, ok, w) {
      ok = 1
      if (when != "") {
        n = split(when, w, " ")
        for (i = 1; i <= n; ++i) if (index(tags, " " w[i] " ") == 0) ok = 0
      }
      if (ok) for (i = 1; i <= nlines; ++i) mark[lines[i]] = id
      id = ""; when = ""; nlines = 0
    }
    FNR == NR {
      if ($0 ~ /^[ \t]*$/) { flush(); next }
      if ($0 ~ /^id: /) { id = substr($0, 5); next }
      if ($0 ~ /^when: /) { when = substr($0, 7); next }
      if (variant == "librpma" && $0 ~ /^librpma: /) { lines[++nlines] = substr($0, 10); next }
      if (variant == "arpma" && $0 ~ /^arpma: /) { lines[++nlines] = substr($0, 8); next }
      next
    }
    FNR == 1 { flush() }
    # A run of marked lines of one entry becomes one marker: an entry may cover
    # a different number of lines in each variant.
    ($0 in mark) {
      if (last != mark[$0]) print "[expected difference: " mark[$0] "]"
      last = mark[$0]
      next
    }
    { last = ""; print }
  ' "$EXPECTED" "$2"
}

if [[ -n $abi_dir ]]; then
  abi_dir=$(cd -- "$abi_dir" 2>/dev/null && pwd -P) || { echo "run.sh: no directory $abi_dir" >&2; exit 3; }
  resolved=$(LD_LIBRARY_PATH=$abi_dir ldd "$bin_dir/librpma/compat_strings" | awk '/librpma\.so/ { print $3 }')
  if [[ $resolved != "$abi_dir"/* ]]; then
    echo "run.sh: with LD_LIBRARY_PATH=$abi_dir, librpma.so resolves to '$resolved'" >&2
    exit 3
  fi
  log "abi: the librpma-built programs also run on $resolved (arpma's drop-in)"
fi

t_run=$SECONDS
unexpected=0
total_checks=0
diffs=$out_dir/diff.txt
: >"$diffs"
run_program() { # DIR PROGRAM OUTPUT_STEM [ENV...]: run it, append its exit status to STEM.out
  local rc=0
  env "${@:4}" timeout 300 "$bin_dir/$1/$2" "${dev_args[@]}" >"$3.out" 2>"$3.err" </dev/null || rc=$?
  echo "$2: exit status $rc" >>"$3.out"
}
if [[ $installed -eq 1 ]]; then
  log "installed: the librpma-built programs run on $(ldd "$bin_dir/librpma/compat_strings" |
    awk '/librpma\.so/ { print $3 }'), the system's librpma.so.0"
  for p in "${PROGRAMS[@]}"; do
    run_program arpma "$p" "$out_dir/$p.arpma"
    run_program librpma "$p" "$out_dir/$p.installed"
    checks=$(sed -n "s/^$p: end, \([0-9]*\) checks\$/\1/p" "$out_dir/$p.arpma.out")
    total_checks=$((total_checks + ${checks:-0}))
    if diff -u --label "$p (arpma variant)" --label "$p (librpma binary on the installed drop-in)" \
      "$out_dir/$p.arpma.out" "$out_dir/$p.installed.out" >>"$diffs"; then
      log "$p: ${checks:-?} checks, the librpma binary on the installed drop-in matches"
    else
      log "$p: ${checks:-?} checks, the librpma binary on the installed drop-in DIFFERS"
      unexpected=1
    fi
  done
  log "installed: $total_checks checks in $((SECONDS - t_run)) s; outputs in $out_dir"
  [[ $unexpected -eq 0 ]] || { cat "$diffs"; echo "compat: FAILED (installed drop-in)"; exit 1; }
  log "PASSED: the unchanged librpma programs on the installed drop-in agree with arpma"
  exit 0
fi
for p in "${PROGRAMS[@]}"; do
  for v in librpma arpma; do
    # In sanitizer builds, librpma's own leaks are not arpma's concern (its rpma_peer_delete
    # with a live request leaks the PD: docs/compatibility.md); arpma keeps detect_leaks.
    asan=${ASAN_OPTIONS:-}
    [[ $v == librpma ]] && asan=${asan:+$asan:}detect_leaks=0
    run_program "$v" "$p" "$out_dir/$p.$v" "ASAN_OPTIONS=$asan"
    normalise "$v" "$out_dir/$p.$v.out" >"$out_dir/$p.$v.norm"
  done
  if [[ -n $abi_dir ]]; then
    run_program librpma "$p" "$out_dir/$p.abi" "LD_LIBRARY_PATH=$abi_dir"
    if ! diff -u --label "$p (arpma variant)" --label "$p (librpma binary on arpma's .so)" \
      "$out_dir/$p.arpma.out" "$out_dir/$p.abi.out" >>"$diffs"; then
      log "$p: the librpma binary on arpma's librpma.so.0 DIFFERS from the arpma variant"
      unexpected=1
    fi
  fi
  checks=$(sed -n "s/^$p: end, \([0-9]*\) checks\$/\1/p" "$out_dir/$p.librpma.out")
  total_checks=$((total_checks + ${checks:-0}))
  marked=$(grep -c '^\[expected difference' "$out_dir/$p.arpma.norm")
  if diff -u --label "$p (librpma 1.2)" --label "$p (arpma)" "$out_dir/$p.librpma.norm" \
    "$out_dir/$p.arpma.norm" >>"$diffs"; then
    log "$p: ${checks:-?} checks, outputs match ($marked expected differences)"
  else
    log "$p: ${checks:-?} checks, UNEXPECTED DIFFERENCES"
    unexpected=1
  fi
done

# entries of expected-differences.txt that no output showed (informational)
unused=$(awk '/^id: /{ print substr($0, 5) }' "$EXPECTED" | while read -r id; do
  grep -qsF "[expected difference: $id]" "$out_dir"/*.norm || echo "$id"
done)
if [[ -n $unused ]]; then
  log "expected differences not seen in this run ($mode): $(tr '\n' ' ' <<<"$unused")"
fi
log "$mode: $total_checks checks per variant in $((SECONDS - t_run)) s; outputs in $out_dir"
if [[ $unexpected -ne 0 ]]; then
  echo
  echo "==== unexpected differences (- librpma 1.2, + arpma) ===="
  cat "$diffs"
  echo "compat: FAILED: outputs differ beyond test/compat/expected-differences.txt"
  exit 1
fi
log "PASSED: librpma 1.2 and arpma agree ($mode)"
