#!/usr/bin/env bash
# The layer rule of docs/architecture.md, checked on the sources (no build needed):
#   support < provider < core < capi < abi
# A file of src/<layer>/ may include "<other>/..." only for a layer at or below its own;
# support and provider see of the public headers only the vocabulary ones (result, error,
# log); rdma-core's headers (<infiniband/...>, <rdma/...>) stay in provider/ and behind
# librpma.h; no public C++ header (include/arpma/) includes them; every public
# header has a unit test file that includes it first.
# The build enforces the first rule too (src/CMakeLists.txt: each layer's include path
# shows only the folders below it); this script also says *why* and runs in CI first.
#
# usage: scripts/layers.sh          check; prints the include graph between layers
#        scripts/layers.sh --files  also lists every crossing include, file by file
# Exits non-zero on a violation.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

list_files=0
[[ "${1:-}" == "--files" ]] && list_files=1

declare -A rank=([support]=0 [provider]=1 [core]=2 [capi]=3 [abi]=4)
vocabulary=" arpma/result.hpp arpma/error.hpp arpma/log.hpp "
violations=0
declare -A edges=()

violation() {
  echo "layers: $1:$2: $3" >&2
  violations=$((violations + 1))
}

# Prints "file<TAB>line<TAB>quote-or-angle<TAB>path" for every #include of the given files.
includes_of() {
  grep -Hn -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$@" |
    sed -E 's/^([^:]+):([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*([<"])([^>"]+)[>"].*/\1\t\2\t\3\t\4/'
}

mapfile -t sources < <(git ls-files --cached --others --exclude-standard -- 'src/*.cpp' 'src/*.hpp')
while IFS=$'\t' read -r file line kind path; do
  layer="${file#src/}"
  layer="${layer%%/*}"
  [[ -n "${rank[${layer}]+x}" ]] || {
    violation "${file}" "${line}" "file outside the layers (${!rank[*]})"
    continue
  }
  target="${path%%/*}"
  if [[ "${kind}" == '"' && -n "${rank[${target}]+x}" ]]; then
    if ((rank[${target}] > rank[${layer}])); then
      violation "${file}" "${line}" "${layer} includes \"${path}\" from the layer above (${target})"
    elif [[ "${target}" != "${layer}" ]]; then
      edges["${layer} -> ${target}"]=$((${edges["${layer} -> ${target}"]:-0} + 1))
      ((list_files)) && echo "  ${file}:${line} -> ${path}"
    fi
  elif [[ "${target}" == arpma ]]; then
    if ((rank[${layer}] < rank[core])) && [[ "${vocabulary}" != *" ${path} "* ]]; then
      violation "${file}" "${line}" "${layer} includes the public header ${path} (only${vocabulary}below core)"
    fi
    edges["${layer} -> public"]=$((${edges["${layer} -> public"]:-0} + 1))
  elif [[ "${kind}" == '<' && ("${target}" == infiniband || "${target}" == rdma) ]]; then
    if [[ "${layer}" != provider ]]; then
      violation "${file}" "${line}" "${layer} includes rdma-core's <${path}> (only provider/ may)"
    fi
    edges["${layer} -> rdma-core"]=$((${edges["${layer} -> rdma-core"]:-0} + 1))
  fi
done < <(includes_of "${sources[@]}")

mapfile -t public < <(git ls-files --cached --others --exclude-standard -- 'include/arpma/*.hpp')
if ((${#public[@]})); then
  while IFS=$'\t' read -r file line kind path; do
    if [[ "${kind}" == '<' && ("${path%%/*}" == infiniband || "${path%%/*}" == rdma) ]]; then
      violation "${file}" "${line}" "public C++ header includes rdma-core's <${path}>"
    fi
  done < <(includes_of "${public[@]}")
fi

# Every public header has its unit test, test/unit/<name>_test.cpp, whose first include is
# that header (so the header is shown to compile on its own there too).
for file in "${public[@]}"; do
  [[ "${file}" == include/arpma/detail/* ]] && continue  # internals, tested through their users
  name="$(basename "${file}" .hpp)"
  test_file="test/unit/${name}_test.cpp"
  first="$(grep -m1 -E '^#include' "${test_file}" 2>/dev/null || true)"
  if [[ "${first}" != "#include \"arpma/${name}.hpp\"" ]]; then
    violation "${file}" 1 "no ${test_file} whose first include is \"arpma/${name}.hpp\""
  fi
done

# Every gtest file keeps its names in a namespace named after it: the sanitizer presets compile
# several of them as one translation unit (ARPMA_TEST_UNITY, test/CMakeLists.txt).
mapfile -t gtest_files < <(git ls-files --cached --others --exclude-standard -- \
  'test/unit/*_test.cpp' 'test/capi/*_test.cpp' 'test/integration/*_test.cpp' \
  'test/security/*_test.cpp')
for file in "${gtest_files[@]}"; do
  name="$(basename "${file}" .cpp)"
  if ! grep -q "^namespace ${name} {\$" "${file}"; then
    violation "${file}" 1 "no 'namespace ${name} {' around its tests (unity builds)"
  fi
done

echo "include graph between layers (number of #include lines):"
for edge in "${!edges[@]}"; do
  printf '  %-24s %4d\n' "${edge}" "${edges[${edge}]}"
done | sort
if ((violations)); then
  echo "layers: ${violations} violation(s) of the rules above" >&2
  exit 1
fi
echo "layers: clean (${#sources[@]} files of src/, ${#public[@]} public headers)"
