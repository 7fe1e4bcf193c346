#!/usr/bin/env bash
# Persistence across a power cut (issue 20, item 4; docs/reliability.md). Two guests
# (test/vm/run-two-nodes.sh): node A's server maps its virtio disk (/dev/vda, a raw image here)
# and registers it, node B's client writes numbered 512-byte records into it and prints
# "flushed N" as soon as record N is persistent (test/persistence/power_cut.c). The host reads
# those lines as they come, kills node A's QEMU with SIGKILL after a random number of records
# (and a random fraction of a second), then reads the image: every record reported flushed
# must be there, intact (test/persistence/check_records.py).
#
#   test/vm/power-cut.sh [--provider soft|verbs] [--kills N] [--control] BUILD_DIR
#
# --provider soft: rpma_flush(RPMA_FLUSH_TYPE_PERSISTENT), which the soft provider serves
#   with msync on the server (default). verbs: rxe0, and librpma's general-purpose server
#   persistency method (GPSPM: the client asks, the server msyncs and answers).
# --kills N: N kills, each on a fresh image (default 2; CI runs 2 per provider).
# --control: the client only writes, never flushes ("written N"): shows what the test sees
#   when nothing is made persistent. Its losses are reported, not judged.
#
# Exit status: 0 when no run lost a record reported flushed, 1 otherwise, 2 on bad usage,
# 125 when a run never got as far as a flushed record (the harness, not the library).
set -uo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
provider=soft
kills=2
control=0
usage() { sed -n '2,20{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
while [[ $# -gt 1 ]]; do
  case $1 in
    --provider) provider=${2:-}; shift 2 ;;
    --kills) kills=${2:-}; shift 2 ;;
    --control) control=1; shift ;;
    *) usage >&2; exit 2 ;;
  esac
done
if [[ $# -ne 1 || ! -x $1/test/power_cut || ! $provider =~ ^(soft|verbs)$ || ! $kills =~ ^[1-9][0-9]*$ ]]; then
  usage >&2
  exit 2
fi
build=$(cd -- "$1" && pwd -P)
mode=msync
[[ $provider == soft ]] || mode=gpspm
server_mode=$mode
# The control run's server only waits (msync mode serves no requests).
[[ $control -eq 0 ]] || mode=none server_mode=msync
word=flushed
[[ $control -eq 0 ]] || word=written

work=$(mktemp -d "${TMPDIR:-/tmp}/power-cut.XXXXXX")
nodes=
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  [[ -z $nodes ]] || kill "$nodes" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# kill_after RECORDS OUT PIDFILE: waits (60 s at most) until OUT holds RECORDS "$word" lines of
# node B, then up to half a second more, and kills node A's QEMU. 0, or 1 if it never got there.
kill_after() {
  local want=$1 out=$2 pidfile=$3 seen=0
  for _ in $(seq 600); do
    seen=$(grep -c "^\[B\] $word " "$out")
    [[ $seen -lt $want ]] || break
    sleep 0.1
  done
  sleep "0.$((RANDOM % 500))"
  [[ -s $pidfile ]] && kill -KILL "$(<"$pidfile")" 2>/dev/null
  [[ $seen -ge $want ]]
}

server="env ARPMA_PROVIDER=$provider EXAMPLE_QUIET_MS=60000 $build/test/power_cut server"
server+=" \$NODE_SERVER_IP 7400 /dev/vda $server_mode"
client="env ARPMA_PROVIDER=$provider EXAMPLE_QUIET_MS=5000 $build/test/power_cut client"
client+=" \$NODE_SERVER_IP 7400 $mode 30000"
lost_runs=0
for k in $(seq "$kills"); do
  image=$work/disk.img out=$work/out pidfile=$work/qemu.pid
  rm -f "$image" "$pidfile"
  truncate -s 16M "$image"
  "$here/run-two-nodes.sh" --timeout 180 --disk "$image" --pidfile "$pidfile" \
    --server "$server" --client "$client" >"$out" 2>&1 &
  nodes=$!
  want=$((20 + RANDOM % 300))
  if ! kill_after "$want" "$out" "$pidfile"; then
    echo "power-cut: run $k: node B never reported $want records; its output:" >&2
    cat "$out" >&2
    exit 125
  fi
  wait "$nodes" # node A dies, so this fails; the records tell
  nodes=
  last=$(sed -n "s/^\[B\] $word \([0-9]*\)$/\1/p" "$out" | tail -n 1)
  result=$(python3 "$here/../persistence/check_records.py" "$image" "${last:--1}")
  rc=$?
  echo "power-cut: $provider ($mode), run $k, killed after $want+ records: $result"
  if [[ $control -eq 0 && $rc -ne 0 ]]; then
    lost_runs=$((lost_runs + 1))
    grep -v "^\[B\] $word " "$out" | tail -n 30
  fi
done
if [[ $lost_runs -gt 0 ]]; then
  echo "power-cut: FAILED: $lost_runs of $kills runs lost records reported $word"
  exit 1
fi
echo "power-cut: $provider ($mode): $kills runs, $([[ $control -eq 0 ]] && echo "no record lost" || echo "control run, losses reported above")"
