#!/usr/bin/env bash
# run.sh -- the package as a user gets it: installs a build of arpma into a temporary
# prefix, then, against that prefix only,
#   1. configures and builds test/consumer/cxx (find_package(arpma 0.1 CONFIG REQUIRED):
#      a C++ program on arpma::arpma and the C program on arpma::rpma) and runs both;
#   2. builds test/consumer/c/main.c with `cc $(pkg-config --cflags --libs librpma)`,
#      as an unchanged librpma program would be, and runs it; then with plain
#      `-L<prefix>/lib -lrpma` (fio's and librpma's own build files), checks that
#      librpma.so.0 resolves to the installed drop-in and runs it;
#   3. checks that every function of the installed <librpma.h> has its man page;
#   4. compiles every installed arpma/*.hpp on its own with rdma-core's headers made
#      unreachable (an include directory in front whose infiniband/ and rdma/ headers are
#      #error): the C++ API needs Boost, not rdma-core; only librpma.h includes verbs.h.
# The programs use the soft provider on loopback (ARPMA_PROVIDER=soft): no RDMA needed.
#
# usage: test/consumer/run.sh <build-dir>
#        test/consumer/run.sh --prefix <dir>   an arpma already installed there (no install
#                                              step), e.g. the Debian packages unpacked by
#                                              test/package/deb.sh, or /usr once installed
# Environment: CC, CXX (compilers), ARPMA_CONSUMER_GENERATOR (CMake generator),
# ARPMA_CONSUMER_FLAGS (compile and link flags for both, e.g. -fsanitize=address for a
# sanitizer build of arpma), ARPMA_CONSUMER_KEEP=1 (keep the temporary directory).
# ctest runs it as the test `consumer` (label consumer).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build=""
installed_prefix=""
if [[ $# -eq 2 && $1 == --prefix ]]; then
  installed_prefix="$(cd "$2" && pwd)"
elif [[ $# -eq 1 ]]; then
  build="$(cd "$1" && pwd)"
else
  echo "usage: test/consumer/run.sh <build-dir> | --prefix <dir>" >&2
  exit 2
fi
cc="${CC:-cc}"
flags="${ARPMA_CONSUMER_FLAGS:-}"

work="$(mktemp -d "${TMPDIR:-/tmp}/arpma-consumer.XXXXXX")"
if [[ "${ARPMA_CONSUMER_KEEP:-0}" == 1 ]]; then
  echo "consumer: keeping ${work}"
else
  trap 'rm -rf "${work}"' EXIT
fi
prefix="${installed_prefix:-${work}/prefix}"
export ARPMA_PROVIDER=soft

step() {
  printf '\n---- consumer: %s\n' "$*"
}

if [[ -n ${build} ]]; then
  step "install ${build} into ${prefix}"
  cmake --install "${build}" --prefix "${prefix}" >"${work}/install.log"
  echo "$(grep -c 'Installing:' "${work}/install.log") files installed"
else
  step "the arpma installed in ${prefix}"
fi

step "find_package(arpma 0.1 CONFIG REQUIRED): configure and build test/consumer/cxx"
generator=()
if [[ -n "${ARPMA_CONSUMER_GENERATOR:-}" ]]; then
  generator=(-G "${ARPMA_CONSUMER_GENERATOR}")
fi
CFLAGS="${flags}" CXXFLAGS="${flags}" LDFLAGS="${flags}" \
  cmake -S "${here}/cxx" -B "${work}/cxx" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="${prefix}" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON \
  >"${work}/cxx-configure.log" || {
  cat "${work}/cxx-configure.log"
  exit 1
}
grep 'arpma .* from' "${work}/cxx-configure.log"
cmake --build "${work}/cxx" >"${work}/cxx-build.log" 2>&1 || {
  cat "${work}/cxx-build.log"
  exit 1
}
step "run the C++ consumer (arpma::arpma)"
"${work}/cxx/arpma_consumer"
step "run the C consumer built by CMake (arpma::rpma)"
"${work}/cxx/rpma_consumer"

step "cc \$(pkg-config --cflags --libs librpma)"
pcdir="$(dirname "$(find "${prefix}" -name librpma.pc -print -quit)")"
export PKG_CONFIG_PATH="${pcdir}"
pkg="$(pkg-config --cflags --libs librpma)"
echo "pkg-config --cflags --libs librpma: ${pkg}"
echo "pkg-config --modversion librpma arpma: $(pkg-config --modversion librpma arpma | tr '\n' ' ')"
# shellcheck disable=SC2086 # pkg-config output is a list of words
"${cc}" -std=c11 -Wall -Wextra -Werror ${flags} -o "${work}/c_consumer" "${here}/c/main.c" ${pkg}
step "run the C consumer (pkg-config librpma)"
# A shared libarpma.so.0 is found like any library outside the loader's paths.
LD_LIBRARY_PATH="$(pkg-config --variable=libdir librpma)${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}" \
  "${work}/c_consumer"

libdir="$(pkg-config --variable=libdir librpma)"
if [[ -e "${libdir}/librpma.so" ]]; then
  step "cc ... -L<prefix>/lib -lrpma -libverbs -lrdmacm: the installed drop-in, as a librpma build links"
  "${cc}" -std=c11 -Wall -Wextra -Werror ${flags} -I"${prefix}/include" -o "${work}/c_lrpma" \
    "${here}/c/main.c" -L"${libdir}" -lrpma -libverbs -lrdmacm
  resolved="$(LD_LIBRARY_PATH="${libdir}" ldd "${work}/c_lrpma" | awk '$1 == "librpma.so.0" { print $3 }')"
  echo "librpma.so.0 => ${resolved}"
  [[ "$(readlink -f "${resolved}")" == "$(readlink -f "${libdir}")"/librpma.so.0.* ]] || {
    echo "consumer: librpma.so.0 is not the installed drop-in" >&2
    exit 1
  }
  step "run it (the soft provider on loopback: only arpma's librpma can)"
  LD_LIBRARY_PATH="${libdir}" "${work}/c_lrpma"
else
  step "no librpma.so in the prefix (a sanitizer build or ARPMA_INSTALL_LIBRPMA=OFF): -lrpma not checked"
fi

step "man pages of the installed <librpma.h>"
header="$(find "${prefix}" -name librpma.h -print -quit)"
man3="$(find "${prefix}" -type d -path '*/man/man3' -print -quit)"
functions="$(grep -v '^typedef' "${header}" | sed -n 's/^[A-Za-z][^(]*[ *]\(rpma_[a-z0-9_]*\)(.*/\1/p')"
missing=0
count=0
for f in ${functions}; do
  count=$((count + 1))
  page="${man3}/${f}.3"
  if [[ ! -f "${page}" ]] || ! grep -q '^\.SH ERRORS' "${page}" ||
    ! grep -q '^\.SH SEE ALSO' "${page}"; then
    echo "missing or incomplete man page: ${page}" >&2
    missing=1
  fi
done
[[ ${missing} -eq 0 ]] || exit 1
echo "${count} functions, ${count} pages in ${man3}"

step "every installed arpma/*.hpp compiles alone, without rdma-core's headers"
poison="${work}/no-rdma-core"
mkdir -p "${poison}/infiniband" "${poison}/rdma"
for h in infiniband/verbs.h infiniband/verbs_api.h rdma/rdma_cma.h rdma/rdma_verbs.h; do
  echo "#error \"a public C++ header of arpma reached rdma-core's <${h}>\"" >"${poison}/${h}"
done
cxx="${CXX:-c++}"
headers=0
while IFS= read -r hpp; do
  rel="${hpp#"${prefix}/include/"}"
  # shellcheck disable=SC2086 # flags is a list of words
  echo "#include <${rel}>" | "${cxx}" -std=c++20 -Wall -Wextra -Werror ${flags} -fsyntax-only \
    -I"${poison}" -I"${prefix}/include" -x c++ - || {
    echo "consumer: <${rel}> does not compile alone without rdma-core" >&2
    exit 1
  }
  headers=$((headers + 1))
done < <(find "${prefix}/include/arpma" -name '*.hpp' | sort)
echo "${headers} headers compile alone, none reaches rdma-core"

step "the installed arpma-perf (tools/arpma-perf)"
perf="$(find "${prefix}" -path '*/bin/arpma-perf' -print -quit)"
if [[ -n "${perf}" ]]; then
  "${perf}" --help >"${work}/arpma-perf-help.txt"
  head -n 1 "${work}/arpma-perf-help.txt"
else
  echo "not installed (ARPMA_BUILD_TOOLS=OFF)"
fi

step "passed"
