#!/usr/bin/env bash
# Installs dependencies, then configures, builds and tests arpma with each
# CMake preset in ARPMA_TEST_PRESETS (default: "default asan").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

banner() {
  printf '\n==== %s ====\n' "$*"
}

presets="${ARPMA_TEST_PRESETS:-default asan}"
jobs="$(nproc)"

banner "install dependencies"
scripts/install-deps.sh

passed=()
for preset in ${presets}; do
  banner "[${preset}] configure"
  cmake --preset "${preset}"
  banner "[${preset}] build (-j ${jobs})"
  cmake --build --preset "${preset}" -j "${jobs}"
  banner "[${preset}] test"
  ctest --preset "${preset}"
  passed+=("${preset}")
done

banner "summary"
echo "all presets passed: ${passed[*]}"
