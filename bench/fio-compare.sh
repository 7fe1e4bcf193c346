#!/usr/bin/env bash
# fio-compare.sh -- one fio binary (Debian's source, test/thirdparty/fio.sh) on Debian's librpma
# and on arpma, alternately, in the Soft-RoCE guest: IOPS, bandwidth and mean total latency per
# job of the librpma_apm / librpma_gpspm matrix, medians over the rounds, and arpma's ratios.
#
#   bench/fio-compare.sh [--build DIR] [--rounds N] [--io-size BYTES]
#
#   --build DIR      arpma build whose install fio links (default build/default; fio is built
#                    there first if it is not yet)
#   --rounds N       rounds, each arpma then Debian's librpma, or the other way round on odd
#                    rounds so neither always runs first (default 3)
#   --io-size BYTES  bytes per job (two jobs per pair; default 8 MiB)
#
# On the host it builds fio if needed and re-runs itself in the guest
# (test/vm/run-in-rxe-vm.sh); in the guest both run on rxe0 (arpma with ARPMA_PROVIDER=verbs).
# Ratios are arpma / librpma: above 1 is better for IOPS and MB/s, below 1 for latency.
# The guest emulates its CPU (TCG), so absolute figures are far below hardware; the ratios are
# what this measures.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=build/default rounds=3 io_size=$((8 << 20))
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2 ;;
    --rounds) rounds=$2 ;;
    --io-size) io_size=$2 ;;
    -h | --help)
      sed -n '2,20{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *)
      echo "fio-compare.sh: unknown option $1" >&2
      exit 2
      ;;
  esac
  shift 2
done

if [[ -z ${RXE_VM_IP:-} ]]; then
  test/thirdparty/fio.sh build "${build}"
  exec test/vm/run-in-rxe-vm.sh --timeout $((300 + rounds * 600)) -- \
    bench/fio-compare.sh --build "${build}" --rounds "${rounds}" --io-size "${io_size}"
fi

out="${build}/thirdparty/fio-compare"
rm -rf "${out}" && mkdir -p "${out}"
for ((round = 0; round < rounds; round++)); do
  order=(arpma debian)
  ((round % 2 == 1)) && order=(debian arpma)
  for lib in "${order[@]}"; do
    echo "fio-compare: round $((round + 1))/${rounds}, ${lib}"
    ARPMA_PROVIDER=verbs test/thirdparty/fio.sh run "${build}" --lib "${lib}" --addr "${RXE_VM_IP}" \
      --io-size "${io_size}" --out "${out}/${lib}-${round}" >"${out}/${lib}-${round}.log" ||
      { cat "${out}/${lib}-${round}.log"; exit 1; }
  done
done

python3 - "${out}" "${rounds}" <<'EOF'
import csv, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
data = {}  # (job, lib) -> list of (iops, mbps, lat)
for lib in ("arpma", "debian"):
    for r in range(rounds):
        with open(f"{out}/{lib}-{r}/results.tsv") as f:
            for row in csv.reader(f, delimiter="\t"):
                data.setdefault((row[0], lib), []).append(tuple(float(v) for v in row[4:7]))
jobs = list(dict.fromkeys(job for job, _ in data))
med = lambda job, lib, i: statistics.median(v[i] for v in data[(job, lib)])
print(f"fio {rounds} rounds, medians; ratio = arpma / Debian's librpma 1.2")
print(f"{'job':<22} {'IOPS librpma':>12} {'arpma':>8} {'ratio':>6}  {'MB/s librpma':>12} {'arpma':>7}"
      f" {'ratio':>6}  {'lat_us librpma':>14} {'arpma':>8} {'ratio':>6}")
for job in jobs:
    d = [med(job, "debian", i) for i in range(3)]
    a = [med(job, "arpma", i) for i in range(3)]
    r = [a[i] / d[i] if d[i] else float("nan") for i in range(3)]
    print(f"{job:<22} {d[0]:>12.0f} {a[0]:>8.0f} {r[0]:>6.2f}  {d[1]:>12.1f} {a[1]:>7.1f} {r[1]:>6.2f}"
          f"  {d[2]:>14.1f} {a[2]:>8.1f} {r[2]:>6.2f}")
EOF
