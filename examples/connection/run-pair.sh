#!/usr/bin/env bash
# Runs a connection example's server and client as two processes and checks
# that both exit 0 and each heard the other's "hello". Both sides' lines are
# shown as they happen, prefixed "server |" and "client |".
#
# usage: run-pair.sh [--client-first] [--expect server|client=TEXT]... <server-bin> <client-bin>
#                    [addr [port]]
#
# addr defaults to $ARPMA_TEST_ADDR, else 127.0.0.1. Without a port, a free one in 20000-32767 is
# picked at random (the C server cannot report what port 0 chose), and
# another one tried if the server cannot listen on it. --client-first starts
# the client, then the server 1 s later: the client must get through by
# retrying. Each process is bounded by `timeout`; the script stops by itself.
# --expect SIDE=TEXT (repeatable; other examples, e.g. examples/datapath)
# checks that SIDE printed a line containing TEXT (a fixed string) instead of
# the hellos.
set -uo pipefail

client_first=0
expects=()
while [[ "${1:-}" == --* ]]; do
  case $1 in
    --client-first) client_first=1 ;;
    --expect)
      if [[ ! "${2:-}" =~ ^(server|client)=. ]]; then
        echo "$0: --expect needs server=TEXT or client=TEXT" >&2
        exit 2
      fi
      expects+=("$2")
      shift
      ;;
    *) break ;;
  esac
  shift
done
if [[ $# -lt 2 || $# -gt 4 ]]; then
  echo "usage: $0 [--client-first] [--expect server|client=TEXT]... <server-bin> <client-bin> [addr [port]]" >&2
  exit 2
fi
server_bin=$1
client_bin=$2
addr=${3:-${ARPMA_TEST_ADDR:-127.0.0.1}}
fixed_port=${4:-}
limit=30 # seconds per process; each side gives up by itself after 10 s of silence

tmp=$(mktemp -d)
# On any exit, stops a side still running (only when the script itself fails
# early or is interrupted).
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
  local f
  for f in "${tmp}"/*.pid; do
    if [[ -f "${f}" ]]; then kill "$(cat "${f}")" 2>/dev/null; fi
  done
  rm -rf "${tmp}"
}
trap cleanup EXIT

# A port nothing listens on now (TCP: the soft provider's connection manager
# uses the same port number).
pick_port() {
  local port
  for _ in $(seq 20); do
    # below Linux's ephemeral range (32768-60999): no outgoing connection of a
    # test running meanwhile can take the port between the pick and the listen
    port=$((20000 + RANDOM % 12768))
    if [[ -z "$(ss -Hltn "sport = :${port}" 2>/dev/null)" ]]; then
      echo "${port}"
      return
    fi
  done
  echo "${port}"
}

# run_side NAME BIN PORT: runs BIN ADDR PORT under `timeout`; its output goes
# to $tmp/NAME.out, and to stdout prefixed "NAME |" (the program's own
# "NAME: " dropped); its pid to $tmp/NAME.pid, its exit status to $tmp/NAME.rc.
run_side() {
  local name=$1 bin=$2 port=$3 line pid rc
  rm -f "${tmp}/${name}.out" "${tmp}/${name}.rc"
  {
    timeout "${limit}" "${bin}" "${addr}" "${port}" 2>&1 &
    pid=$!
    echo "${pid}" >"${tmp}/${name}.pid"
    wait "${pid}"
    rc=$?
    rm -f "${tmp}/${name}.pid"
    echo "${rc}" >"${tmp}/${name}.rc"
  } | while IFS= read -r line; do
    printf '%s\n' "${line}" >>"${tmp}/${name}.out"
    printf '%s | %s\n' "${name}" "${line#"${name}: "}"
  done
}

# Waits until the server listens (0) or has exited (1).
wait_listening() {
  for _ in $(seq 200); do
    if grep -q 'listening on' "${tmp}/server.out" 2>/dev/null; then return 0; fi
    if [[ -f "${tmp}/server.rc" ]]; then return 1; fi
    sleep 0.05
  done
  return 1
}

port=${fixed_port:-$(pick_port)}
if [[ ${client_first} -eq 1 ]]; then
  run_side client "${client_bin}" "${port}" &
  client_job=$!
  sleep 1
  run_side server "${server_bin}" "${port}" &
  server_job=$!
else
  for try in 1 2 3 4 5; do
    run_side server "${server_bin}" "${port}" &
    server_job=$!
    if wait_listening; then break; fi
    wait "${server_job}"
    if [[ -n "${fixed_port}" || ${try} -eq 5 ]] ||
      ! grep -q 'cannot listen' "${tmp}/server.out" 2>/dev/null; then
      echo "FAILED: the server did not start listening on ${addr}:${port}"
      exit 1
    fi
    port=$(pick_port)
    echo "(port busy, trying ${port})"
  done
  run_side client "${client_bin}" "${port}" &
  client_job=$!
fi
wait "${client_job}"
wait "${server_job}"

status=0
fail() {
  echo "FAILED: $*"
  status=1
}
server_rc=$(cat "${tmp}/server.rc" 2>/dev/null || echo '?')
client_rc=$(cat "${tmp}/client.rc" 2>/dev/null || echo '?')
if [[ "${server_rc}" != 0 ]]; then fail "server exited with ${server_rc}"; fi
if [[ "${client_rc}" != 0 ]]; then fail "client exited with ${client_rc}"; fi
if [[ ${#expects[@]} -eq 0 ]]; then
  expects=('server=private data "hello from client"' 'client=private data "hello from server"')
  what="each heard the other's hello"
else
  what="each printed what was expected"
fi
for e in "${expects[@]}"; do
  if ! grep -qF -- "${e#*=}" "${tmp}/${e%%=*}.out" 2>/dev/null; then
    fail "the ${e%%=*} did not print: ${e#*=}"
  fi
done
if [[ ${status} -eq 0 ]]; then
  echo "OK: both exited 0, ${what} (${addr}:${port})"
fi
exit "${status}"
