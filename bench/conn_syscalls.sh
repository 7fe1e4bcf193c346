#!/usr/bin/env bash
# Syscalls per sequential connection of the blocking C path, inside the Soft-RoCE guest: the same
# program (bench/librpma_compare.c) on Debian's librpma and on arpma's librpma.so.0, both sides
# counted (`strace -f -c`; the server is a forked child), ROUNDS rounds in turn (issue 17, item 5).
# With a second build directory (another commit's, built under the repository so that the guest
# sees it), its librpma.so.0 takes a turn too: a before/after of one change in one boot.
#
#   test/vm/run-in-rxe-vm.sh -- bench/conn_syscalls.sh build/default [build/before]
set -euo pipefail
build=$(cd -- "${1:?usage: $0 BUILD_DIR}" && pwd -P)
addr=${RXE_VM_IP:?run me inside the guest: test/vm/run-in-rxe-vm.sh -- $0 BUILD_DIR}
export ARPMA_PROVIDER=verbs ARPMA_TEST_ADDR=$addr
prog=$build/bench/librpma_compare
other=${2:+$(cd -- "$2" && pwd -P)}
n=${N_CONN:-100}
rounds=${ROUNDS:-2}
port=7400
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  for lib in librpma arpma ${other:+before}; do
    port=$((port + 1))
    case $lib in
      librpma) timeout 300 strace -f -c -o "$out" "$prog" "$addr" "$port" connect "$n" >/dev/null ;;
      arpma) LD_LIBRARY_PATH=$build/librpma-abi timeout 300 strace -f -c -o "$out" "$prog" "$addr" "$port" connect "$n" >/dev/null ;;
      before) LD_LIBRARY_PATH=$other/librpma-abi timeout 300 strace -f -c -o "$out" "$prog" "$addr" "$port" connect "$n" >/dev/null ;;
    esac
    awk -v n="$n" -v lib="$lib" -v r="$r" '
      NR > 2 && $1 ~ /^[0-9.]+$/ && $NF != "total" {
        total += $4
        if ($4 / n >= 1) top = top sprintf(" %s %.1f", $NF, $4 / n)
      }
      END { printf "round %d %s: %.1f syscalls per connection (1 or more:%s)\n", r, lib, total / n, top }' "$out"
  done
done
