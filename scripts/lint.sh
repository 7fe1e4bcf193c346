#!/usr/bin/env bash
# Checks the layers (scripts/layers.sh), formatting (clang-format, config in
# .clang-format) and runs clang-tidy (config in .clang-tidy) on src/. Reports only; never rewrites files.
# Checks tracked files plus untracked ones git does not ignore (work in
# progress), so a fresh clone checks exactly the tracked set.
# Exits non-zero when either tool has findings.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir="${ARPMA_LINT_BUILD_DIR:-build/default}"
status=0

# Prefer the unversioned tool names, fall back to the Debian 12 versioned ones.
find_tool() {
  local name
  for name in "$@"; do
    if command -v "${name}" >/dev/null 2>&1; then
      echo "${name}"
      return 0
    fi
  done
  echo "lint: none of $* found (run scripts/install-deps.sh)" >&2
  return 1
}
clang_format="$(find_tool clang-format clang-format-14)"
clang_tidy="$(find_tool clang-tidy clang-tidy-14)"

echo "==== layers ===="
scripts/layers.sh || status=1

echo "==== clang-format ===="
mapfile -t format_files < <(git ls-files --cached --others --exclude-standard -- '*.c' '*.h' '*.cpp' '*.hpp')
if [[ ${#format_files[@]} -eq 0 ]]; then
  echo "no tracked sources to check"
elif "${clang_format}" --dry-run -Werror "${format_files[@]}"; then
  echo "clang-format: ${#format_files[@]} files clean"
else
  echo "clang-format: findings above" >&2
  status=1
fi

echo "==== clang-tidy ===="
if [[ ! -f "${build_dir}/compile_commands.json" ]]; then
  echo "clang-tidy: skipped, ${build_dir}/compile_commands.json is absent" \
    "(run: cmake --preset default)"
else
  mapfile -t tidy_files < <(git ls-files --cached --others --exclude-standard -- 'src/*.cpp' 'src/**/*.cpp')
  if [[ ${#tidy_files[@]} -eq 0 ]]; then
    echo "no tracked src/**/*.cpp files to check"
  elif "${clang_tidy}" -p "${build_dir}" --quiet "${tidy_files[@]}"; then
    echo "clang-tidy: ${#tidy_files[@]} files clean"
  else
    echo "clang-tidy: findings above" >&2
    status=1
  fi
fi

exit "${status}"
