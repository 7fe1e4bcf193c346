#!/usr/bin/env bash
# Opt-in libFuzzer run (not part of scripts/test.sh or CI): configures
# build/fuzz with clang (ASan + UBSan, libFuzzer), builds the soft provider's
# connection-manager frame harness (test/fuzz/soft_cm_frames_fuzz.cpp) and runs
# it for SECONDS (default 60) on a copy of the seed corpus, so the repository's
# test/fuzz/corpus/ keeps only the seeds. Exits non-zero on a crash, a
# sanitizer report, a leak, a timeout or a failed listener check, and prints
# the path of the input that caused it.
#
# usage: scripts/fuzz.sh [SECONDS]      env: CC/CXX (default clang/clang++),
#        FUZZ_ARGS (extra libFuzzer flags, e.g. "-seed=1")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${1:-60}"
if ! [[ "${seconds}" =~ ^[0-9]+$ ]] || [[ "${seconds}" -lt 1 ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS]   (default 60)" >&2
  exit 2
fi
export CC="${CC:-clang}" CXX="${CXX:-clang++}"
command -v "${CXX}" > /dev/null || {
  echo "scripts/fuzz.sh: ${CXX} not found (apt-get install clang)" >&2
  exit 2
}

build=build/fuzz
name=soft_cm_frames
cmake -S . -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DARPMA_FUZZ=ON \
  -DARPMA_SANITIZE=address,undefined -DARPMA_WERROR=OFF \
  -DARPMA_BUILD_TESTS=OFF -DARPMA_BUILD_EXAMPLES=OFF -DARPMA_BUILD_BENCH=OFF > /dev/null
cmake --build "${build}" --target "${name}_fuzz"

corpus="${build}/corpus/${name}"
artifacts="${build}/artifacts/${name}/"
rm -rf "${artifacts}"
mkdir -p "${corpus}" "${artifacts}"
cp -n test/fuzz/corpus/"${name}"/* "${corpus}/"
before=$(find "${corpus}" -type f | wc -l)
log="${build}/${name}_fuzz.log"

set +e
# shellcheck disable=SC2086  # FUZZ_ARGS is a list of flags
"${build}/test/fuzz/${name}_fuzz" "${corpus}" -max_total_time="${seconds}" -timeout=5 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="${artifacts}" ${FUZZ_ARGS:-} \
  > "${log}" 2>&1
rc=$?
set -e

after=$(find "${corpus}" -type f | wc -l)
last=$(grep -E '^#[0-9]+' "${log}" | tail -n 1 || true)
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "${log}")
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "${log}")
cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<< "${last}")
echo "soft_cm_frames_fuzz: ${seconds} s, ${runs:-?} executions, ${rate:-?} exec/s, cov: ${cov:-?}"
echo "  corpus: ${before} -> ${after} entries ($((after - before)) new) in ${corpus}"
echo "  last status: ${last}"
echo "  log: ${log}"
if [[ ${rc} -ne 0 ]]; then
  grep -E 'ERROR|SUMMARY|soft_cm_frames_fuzz:|Test unit written|^artifact_prefix' "${log}" | head -n 20 >&2 || true
  echo "scripts/fuzz.sh: the fuzzer failed (exit ${rc}); reproduce with:" >&2
  for f in "${artifacts}"*; do
    [[ -e "${f}" ]] && echo "  ${build}/test/fuzz/${name}_fuzz ${f}" >&2
  done
  exit 1
fi
