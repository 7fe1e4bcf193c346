# Documentation targets, included from the top-level CMakeLists.txt.
#
# Man pages (section 3, one per function of include/librpma.h, and librpma(7)): generated
# at build time by scripts/gen-man.sh from the header's manual blocks into <build>/man,
# installed under CMAKE_INSTALL_MANDIR. Target: arpma_man (part of `all`).
#
# API reference: `cmake --build <build> --target docs` runs Doxygen over include/ (and the
# README as its main page) into <build>/docs/html; without Doxygen (Debian: apt install
# doxygen) the target prints a message and succeeds.

option(ARPMA_BUILD_MAN "Generate (and install) the C API man pages from include/librpma.h" ON)

if(ARPMA_BUILD_MAN)
  set(ARPMA_MAN_DIR ${PROJECT_BINARY_DIR}/man)
  file(GLOB _arpma_man_cxx_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/arpma/*.hpp)
  add_custom_command(
    OUTPUT ${ARPMA_MAN_DIR}/man.stamp
    COMMAND ${PROJECT_SOURCE_DIR}/scripts/gen-man.sh --version ${PROJECT_VERSION}
            --header ${PROJECT_SOURCE_DIR}/include/librpma.h ${ARPMA_MAN_DIR}
    COMMAND ${CMAKE_COMMAND} -E touch ${ARPMA_MAN_DIR}/man.stamp
    DEPENDS ${PROJECT_SOURCE_DIR}/include/librpma.h ${_arpma_man_cxx_headers}
            ${PROJECT_SOURCE_DIR}/scripts/gen-man.sh ${PROJECT_SOURCE_DIR}/scripts/gen-man.awk
    COMMENT "Generating the C API man pages from include/librpma.h"
    VERBATIM)
  add_custom_target(arpma_man ALL DEPENDS ${ARPMA_MAN_DIR}/man.stamp)
  if(ARPMA_INSTALL)
    install(DIRECTORY ${ARPMA_MAN_DIR}/man3 ${ARPMA_MAN_DIR}/man7
            DESTINATION ${CMAKE_INSTALL_MANDIR} COMPONENT arpma_development)
  endif()
endif()

find_package(Doxygen QUIET)
if(DOXYGEN_FOUND)
  configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${PROJECT_BINARY_DIR}/docs/Doxyfile @ONLY)
  add_custom_target(docs
    COMMAND Doxygen::doxygen ${PROJECT_BINARY_DIR}/docs/Doxyfile
    COMMAND ${CMAKE_COMMAND} -E echo
            "docs: API reference in ${PROJECT_BINARY_DIR}/docs/html/index.html"
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "Generating the API reference with Doxygen"
    VERBATIM)
else()
  add_custom_target(docs
    COMMAND ${CMAKE_COMMAND} -E echo
            "docs: Doxygen not found, API reference skipped (Debian: apt install doxygen, then reconfigure)"
    VERBATIM)
endif()
