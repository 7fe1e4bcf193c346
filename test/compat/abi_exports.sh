#!/usr/bin/env bash
# abi_exports.sh LIB MAP -- the drop-in LIB defines exactly the functions the version script
# MAP lists, each at LIBRPMA_1.0, and nothing else (ctest: librpma_abi_exports). A library
# that links but exports nothing (as the drop-in once did with BUILD_SHARED_LIBS=ON) fails.
set -euo pipefail
lib=$1 map=$2
want="$(grep -oE '^ +rpma_[a-z0-9_]+;' "${map}" | tr -d ' ;' | sort)"
got="$(nm -D --defined-only --with-symbol-versions "${lib}" | awk '$2 != "A" { print $3 }' | sort)"
expected="$(sed 's/$/@@LIBRPMA_1.0/' <<<"${want}")"
if [[ ${got} != "${expected}" ]]; then
  echo "abi_exports: ${lib} does not export exactly the $(wc -l <<<"${want}") functions of ${map}:"
  diff <(echo "${expected}") <(echo "${got}") || true
  exit 1
fi
echo "abi_exports: ${lib} exports the $(wc -l <<<"${want}") functions of ${map} at LIBRPMA_1.0, nothing else"
