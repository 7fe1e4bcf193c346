# shellcheck shell=bash
# Helpers sourced by the loopback benchmarks that start one server after another
# (bench/soft_latency.sh, bench/syscalls.sh).

# unused_port_after N: the first port above N that no TCP socket uses, not even one in
# TIME_WAIT. sockperf's server sets no SO_REUSEADDR, so a run started within a minute of the
# last one could not bind the same numbers.
unused_port_after() {
  local used p=$(($1 + 1))
  used=$(ss -tanH 2>/dev/null)
  while [[ $used == *":$p "* ]]; do p=$((p + 1)); done
  echo "$p"
}

# wait_tcp_listener PORT WHO: until something listens on PORT (5 s at most); otherwise says so
# in WHO's name and fails.
wait_tcp_listener() {
  for _ in $(seq 1 250); do
    [[ -n $(ss -ltnH "sport = :$1" 2>/dev/null) ]] && return 0
    sleep 0.02
  done
  echo "$2: nothing listens on port $1 after 5 s" >&2
  return 1
}
