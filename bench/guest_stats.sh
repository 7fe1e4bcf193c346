# shellcheck shell=bash
# Helpers sourced by the guest benchmarks (bench/rxe-compare.sh, bench/conn_rtt.sh).

# "busy idle" jiffies of all CPUs, from /proc/stat
cpu() { awk '/^cpu / { printf "%d %d\n", $2 + $3 + $4 + $7 + $8, $5 + $6 }' /proc/stat; }
# busy% since the "busy idle" pair $1 $2
busy_since() {
  local b i
  read -r b i < <(cpu)
  awk -v b=$((b - $1)) -v i=$((i - $2)) 'BEGIN { printf "%.0f", (b + i > 0) ? 100 * b / (b + i) : 0 }'
}
# the median of the numbers on stdin, one per line
median() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
