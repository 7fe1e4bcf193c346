#!/usr/bin/env bash
# fio.sh -- fio's librpma engines, built from Debian's source package, unchanged, on arpma.
#
#   test/thirdparty/fio.sh build BUILD_DIR
#       Installs BUILD_DIR into BUILD_DIR/thirdparty/prefix, gets fio's source with
#       `apt-get source fio` (a deb-src entry for Debian's archive: scripts/install-deps.sh),
#       and builds fio against that prefix (its configure finds librpma.h there and links
#       -lrpma, i.e. arpma's librpma.so.0 drop-in). Idempotent: the source and the configured
#       tree are kept; fio links librpma dynamically, so a new arpma needs no rebuild.
#   test/thirdparty/fio.sh run BUILD_DIR [--lib arpma|debian|system] [--addr A] [--port P]
#                                        [--io-size BYTES] [--out DIR] [--only REGEX]
#       Runs every server/client pair of the matrix below with the fio built above, on
#       arpma (LD_LIBRARY_PATH=the prefix; the provider is whatever ARPMA_PROVIDER says) or on
#       Debian's librpma (the loader's default librpma.so.0; `system`: whichever package
#       provides it, e.g. arpma's librpma0-arpma: test/package/deb.sh). Each job must end with exit
#       status 0 on both sides, error 0 in fio's JSON and exactly numjobs x io-size bytes moved
#       (read + write); --only runs the pairs whose name (e.g. gpspm-write-qd1) matches.
#       Prints one table row per job (also as TSV in DIR/results.tsv, which
#       bench/fio-compare.sh reads) and exits 1 if any job failed.
#
# Matrix: librpma_apm (rw = write, read, rw) and librpma_gpspm (write, randwrite; its only
# modes), iodepth 1 (sync=1, every write flushed) and 16 (sync=0), numjobs 2 (two connections,
# two ports), 4 KiB blocks, io-size per job (default 16 MiB), DRAM on the server ("malloc").
# Every fio process runs under `timeout` (ARPMA_FIO_TIMEOUT seconds, default 120, then SIGKILL
# 10 s later: a fio thread blocked in a completion wait does not see SIGTERM).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
usage() { sed -n '2,26{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
die() {
  echo "fio.sh: $*" >&2
  exit 2
}

[[ $# -ge 2 ]] || {
  usage >&2
  exit 2
}
cmd=$1
[[ -d $2 ]] || die "no build directory '$2'"
build="$(cd "$2" && pwd -P)"
shift 2
top="${build}/thirdparty"
prefix="${top}/prefix"

fio_dir() { find "${top}" -maxdepth 1 -type d -name 'fio-[0-9]*' -print -quit 2>/dev/null; }

do_build() {
  mkdir -p "${top}/dl"
  cmake --install "${build}" --prefix "${prefix}" >"${top}/install.log"
  [[ -e ${prefix}/lib/librpma.so.0 ]] || die "${build} installs no librpma.so.0 (ARPMA_INSTALL_LIBRPMA=OFF?)"
  if [[ -z $(fio_dir) ]]; then
    if ! ls "${top}"/dl/fio_*.dsc >/dev/null 2>&1; then
      echo "fio.sh: apt-get source fio"
      (cd "${top}/dl" && apt-get source --download-only fio) || die "apt-get source fio failed:" \
        "is there a deb-src entry for Debian's archive? (scripts/install-deps.sh adds one)"
    fi
    local dsc
    dsc="$(ls "${top}"/dl/fio_*.dsc | head -n 1)"
    # Debian's patches applied, nothing else: the source as Debian builds it. apt-get has
    # checked every file against the signed Sources index, so no second signature check.
    (cd "${top}" && dpkg-source --no-check -x "${dsc}" >/dev/null)
  fi
  local src
  src="$(fio_dir)"
  if [[ ! -e ${src}/config-host.mak ]]; then
    # --disable-native as Debian configures it: the binary also runs on the guest's emulated CPU.
    echo "fio.sh: configure $(basename "${src}") against ${prefix}"
    (cd "${src}" && ./configure --disable-native --extra-cflags="-I${prefix}/include -L${prefix}/lib" >"${top}/fio-configure.log") ||
      { cat "${top}/fio-configure.log"; die "fio's configure failed"; }
    local feature
    for feature in librpma libprotobuf_c libpmem; do
      grep -Eq "^${feature} +yes" "${top}/fio-configure.log" ||
        die "fio's configure did not find ${feature} (log: ${top}/fio-configure.log)"
    done
  fi
  echo "fio.sh: make fio ($(basename "${src}"))"
  make -C "${src}" -j "$(nproc)" fio >"${top}/fio-build.log" 2>&1 ||
    { tail -n 40 "${top}/fio-build.log"; die "building fio failed"; }
  local engine
  for engine in librpma_apm_client librpma_apm_server librpma_gpspm_client librpma_gpspm_server; do
    "${src}/fio" --enghelp | grep -x "[[:space:]]*${engine}" >/dev/null || die "fio has no ${engine} engine"
  done
  echo "fio.sh: built ${src}/fio with the librpma engines"
}

# The librpma.so.0 the loader picks for fio with the current LD_LIBRARY_PATH.
resolved_librpma() { ldd "$1" | awk '$1 == "librpma.so.0" { print $3 }'; }

# One server/client pair; its exit statuses go to ${out}/pairs.tsv, its JSON reports to ${out}.
run_pair() {
  local engine=$1 rw=$2 depth=$3 fio=$4 name="$1-$2-qd$3"
  local sync=1 server_extra=()
  [[ ${depth} -gt 1 ]] && sync=0
  # GPSPM's server keeps received flush requests it cannot answer yet (no free send slot) in an
  # array of iodepth entries, and polls the next completion into the slot after the last one:
  # with as many queued as its iodepth, that slot is past the array (fio 3.33's
  # server_cmpl_process; a heap overflow, "free(): invalid pointer" at exit, seen on rxe with
  # Debian's librpma and with arpma alike). A client has at most its iodepth requests
  # outstanding, so a server iodepth one larger never gets there.
  [[ ${engine} == gpspm ]] && server_extra=(--iodepth=$((depth + 1)) --busy_wait_polling=1)
  local common=(--create_serialize=0 --serverip="${addr}" --port="${port}" --thread --numjobs=2
    --output-format=json)
  local srv_rc=0 cli_rc=0
  timeout -k 10 "${limit}" "${fio}" --name=server --ioengine="librpma_${engine}_server" "${common[@]}" \
    --size=$((io_size * 2)) --filename=malloc --direct_write_to_pmem=0 "${server_extra[@]}" \
    --output="${out}/${name}.server.json" >"${out}/${name}.server.log" 2>&1 &
  local server=$!
  # The client has no retry: wait until both of the server's ports listen (or it died).
  local deadline=$((SECONDS + 20))
  while ((SECONDS < deadline)); do
    kill -0 "${server}" 2>/dev/null || break
    listening "${port}" $((port + 1)) && break
    sleep 0.05
  done
  timeout -k 10 "${limit}" "${fio}" --name=client --ioengine="librpma_${engine}_client" "${common[@]}" \
    --group_reporting=1 --sync="${sync}" --iodepth="${depth}" --iodepth_batch_submit=1 \
    --rw="${rw}" --bs=4096 --io_size="${io_size}" --output="${out}/${name}.client.json" \
    >"${out}/${name}.client.log" 2>&1 || cli_rc=$?
  wait "${server}" || srv_rc=$?
  printf '%s\t%s\t%s\n' "${name}" "${cli_rc}" "${srv_rc}" >>"${out}/pairs.tsv"
  echo "fio.sh: ${name}: client exit ${cli_rc}, server exit ${srv_rc}"
}

# Whether ports $1 and $2 both listen: TCP sockets (soft provider) or rdma_cm ids (rdma-core).
listening() {
  local listeners
  # Without an RDMA device `rdma` fails; that must not fail the pipeline (pipefail).
  listeners="$({ ss -Htln || true; rdma resource show cm_id || true; } 2>/dev/null | grep LISTEN)" ||
    return 1
  grep -Eq ":$1[[:space:]]" <<<"${listeners}" && grep -Eq ":$2[[:space:]]" <<<"${listeners}"
}

do_run() {
  lib=arpma addr=127.0.0.1 port=7240 io_size=$((16 << 20)) out="" only=""
  while [[ $# -gt 0 ]]; do
    case $1 in
      --lib) lib=$2 ;;
      --addr) addr=$2 ;;
      --port) port=$2 ;;
      --io-size) io_size=$2 ;;
      --out) out=$2 ;;
      --only) only=$2 ;;
      *) die "unknown option $1" ;;
    esac
    shift 2 || die "$1 needs a value"
  done
  limit="${ARPMA_FIO_TIMEOUT:-120}"
  local src fio expect
  src="$(fio_dir)"
  fio="${src}/fio"
  [[ -x ${fio} ]] || die "no fio built under ${top} (run: $0 build ${build})"
  case ${lib} in
    arpma)
      export LD_LIBRARY_PATH="${prefix}/lib${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
      expect="${prefix}/lib/librpma.so.0"
      ;;
    debian | system)
      unset LD_LIBRARY_PATH
      # awk reads to the end: an early exit would SIGPIPE ldconfig, which pipefail turns into a
      # failed run (seen in the guest, exit status 141).
      expect="$(ldconfig -p | awk '$1 == "librpma.so.0" && !n++ { print $NF }')"
      [[ -n ${expect} ]] || die "no librpma.so.0 is installed (Debian's librpma0 or librpma0-arpma)"
      if [[ ${lib} == debian ]] && command -v dpkg >/dev/null &&
        [[ $(dpkg -S "$(readlink -f "${expect}")" 2>/dev/null | cut -d: -f1) == librpma0-arpma ]]; then
        die "the system's librpma.so.0 is arpma's drop-in package, not Debian's (--lib system)"
      fi
      ;;
    *) die "--lib is arpma, debian or system" ;;
  esac
  local got
  got="$(resolved_librpma "${fio}")"
  [[ $(readlink -f "${got}") == $(readlink -f "${expect}") ]] ||
    die "fio would load ${got:-no librpma.so.0}, not ${expect}"
  [[ -n ${out} ]] || out="${top}/fio-out/${lib}-${ARPMA_PROVIDER:-default}"
  rm -rf "${out}" && mkdir -p "${out}"
  out="$(cd "${out}" && pwd -P)"
  # filename=malloc makes the server engines use DRAM, but fio still lays a file "malloc" out in
  # the working directory, from both server jobs at once: one unlinks what the other has open.
  # On the guest's 9p share the other's ftruncate then fails (ENOENT), so fio works in a local
  # temporary directory.
  work="$(mktemp -d "${TMPDIR:-/tmp}/arpma-fio.XXXXXX")"
  trap 'rm -rf "${work}"' EXIT
  cd "${work}"
  echo "fio.sh: fio $(basename "${src}") on ${lib} (${got}), provider ${ARPMA_PROVIDER:-default}," \
    "${addr}:${port}, $((io_size >> 20)) MiB x 2 jobs each; logs in ${out}"
  local engine rw depth
  for engine in apm gpspm; do
    local modes=(write read rw)
    [[ ${engine} == gpspm ]] && modes=(write randwrite)
    for rw in "${modes[@]}"; do
      for depth in 1 16; do
        [[ ${engine}-${rw}-qd${depth} =~ ${only} ]] || continue
        run_pair "${engine}" "${rw}" "${depth}" "${fio}"
      done
    done
  done
  # One interpreter for all pairs: starting python costs seconds on the guest's emulated CPU.
  python3 "${here}/fio_result.py" "${out}" "${lib}" $((io_size * 2))
}

case ${cmd} in
  build) do_build "$@" ;;
  run) do_run "$@" ;;
  *)
    usage >&2
    exit 2
    ;;
esac
