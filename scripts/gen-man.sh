#!/usr/bin/env bash
# gen-man.sh -- generates the man pages of arpma's C API from include/librpma.h:
# <outdir>/man3/<function>.3 for every function the header declares, and
# <outdir>/man7/librpma.7 (overview). CMake runs it at build time (target arpma_man,
# cmake/ArpmaDocs.cmake); the pages are installed with the library.
#
# usage: scripts/gen-man.sh [--version V] [--header FILE] OUTDIR
#
# The source is the header's manual blocks, as they are written:
#
#   /*
#    * name [/ name | / _suffix]... -- brief[. more description]
#    * [other name / _suffix -- brief]        (one block may document a family)
#    *
#    * Description paragraphs.
#    *
#    * RETURN VALUE: 0 ..., or:
#    * - RPMA_E_X - when it happens          (ERRORS; or inline: "0, or RPMA_E_X (why)")
#    * C++: arpma::function(), ...          (the C++ counterpart: declaration looked up in
#    */                                      include/arpma/*.hpp)
#   int name(...);
#
# A block documents the prototypes that follow it, up to the next block. A declared
# function without a block still gets a page (from its prototype) and a warning.
# Verify a page with: MANWIDTH=80 man -l OUTDIR/man3/rpma_conn_req_new.3
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
header="${root}/include/librpma.h"
version=""
outdir=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --version)
      version="$2"
      shift 2
      ;;
    --header)
      header="$2"
      shift 2
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      echo "gen-man.sh: unknown option $1" >&2
      exit 2
      ;;
    *)
      outdir="$1"
      shift
      ;;
  esac
done
if [[ -z "${outdir}" ]]; then
  echo "usage: scripts/gen-man.sh [--version V] [--header FILE] OUTDIR" >&2
  exit 2
fi
if [[ -z "${version}" ]]; then
  # The one place of the version: project(arpma VERSION x.y.z ...).
  version="$(sed -n 's/^project(arpma VERSION \([0-9.]*\).*/\1/p' "${root}/CMakeLists.txt")"
fi

include_dir="$(dirname "${header}")"
cxx_headers=""
for f in "${include_dir}"/arpma/*.hpp; do
  [[ -e "${f}" ]] && cxx_headers+="${f} "
done

# Pages of functions that left the header do not linger.
mkdir -p "${outdir}/man3" "${outdir}/man7"
rm -f "${outdir}"/man3/*.3 "${outdir}"/man7/librpma.7

awk -v out="${outdir}" -v version="${version}" -v cxx_headers="${cxx_headers}" \
  -v include_dir="${include_dir}" -f "${root}/scripts/gen-man.awk" "${header}"
