#!/usr/bin/env bash
# Opt-in libFuzzer run (scripts/test.sh --fuzz; not in CI's default command):
# configures build/fuzz with clang (ASan + UBSan, libFuzzer), builds every
# harness (test/fuzz/<name>_fuzz.cpp) and runs each for SECONDS (default 60)
# on a copy of its seed corpus (test/fuzz/corpus/<name>/), so the repository
# keeps only the seeds. A harness failing (crash, sanitizer report, leak,
# timeout or a violated property) does not stop the others; the script then
# exits non-zero and prints how to replay each failing input.
#
# usage: scripts/fuzz.sh [SECONDS] [NAME...]   (NAME: e.g. soft_mr_access; default all)
#        env: CC/CXX (default clang/clang++), FUZZ_ARGS (extra libFuzzer flags, e.g. "-seed=1")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  echo "usage: scripts/fuzz.sh [SECONDS] [NAME...]   (default 60 s, every harness)" >&2
  exit 2
}
seconds=60
if [[ $# -gt 0 ]]; then
  if ! [[ "$1" =~ ^[0-9]+$ ]] || [[ "$1" -lt 1 ]]; then usage; fi
  seconds=$1
  shift
fi
names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  for f in test/fuzz/*_fuzz.cpp; do
    n=$(basename "${f}" .cpp)
    names+=("${n%_fuzz}")
  done
fi
for n in "${names[@]}"; do
  [[ -f "test/fuzz/${n}_fuzz.cpp" ]] || {
    echo "scripts/fuzz.sh: no harness test/fuzz/${n}_fuzz.cpp" >&2
    usage
  }
done

export CC="${CC:-clang}" CXX="${CXX:-clang++}"
command -v "${CXX}" > /dev/null || {
  echo "scripts/fuzz.sh: ${CXX} not found (apt-get install clang)" >&2
  exit 2
}

build=build/fuzz
# -Werror off: clang warns about things GCC (the project's compiler) does not.
cmake -S . -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DARPMA_FUZZ=ON \
  -DARPMA_SANITIZE=address,undefined -DARPMA_WERROR=OFF \
  -DARPMA_BUILD_TESTS=OFF -DARPMA_BUILD_EXAMPLES=OFF -DARPMA_BUILD_BENCH=OFF > /dev/null
cmake --build "${build}" --target "${names[@]/%/_fuzz}"

failed=()
for name in "${names[@]}"; do
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
  ft=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<< "${last}")
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "${log}")
  echo "${name}_fuzz: ${seconds} s, ${runs:-?} executions, ${rate:-?} exec/s," \
    "cov: ${cov:-?}, ft: ${ft:-?}, peak RSS ${rss:-?} MB," \
    "corpus ${before} -> ${after} ($((after - before)) new), log ${log}"
  if [[ ${rc} -ne 0 ]]; then
    grep -E 'ERROR|SUMMARY|property violated|_fuzz:|Test unit written' "${log}" | head -n 20 >&2 || true
    echo "scripts/fuzz.sh: ${name}_fuzz failed (exit ${rc}); replay with:" >&2
    for f in "${artifacts}"*; do
      [[ -e "${f}" ]] && echo "  ${build}/test/fuzz/${name}_fuzz ${f}" >&2
    done
    failed+=("${name}")
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "scripts/fuzz.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "scripts/fuzz.sh: every harness ran ${seconds} s without a finding: ${names[*]}"
