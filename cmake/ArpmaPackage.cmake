# Debian packages (issue 18, item 5), made by CPack from the install components of
# cmake/ArpmaInstall.cmake:
#
#   cmake --preset package && cmake --build --preset package && cpack --preset package
#   (or test/package/deb.sh build, which also checks what came out)
#
# gives, in build/package/:
#   libarpma0       arpma_runtime     libarpma.so.0 (the C++ and C APIs in one library)
#   libarpma-dev    arpma_development headers (arpma/*.hpp, librpma.h), libarpma.so, librpma.so,
#                                     arpmaConfig.cmake, arpma.pc, librpma.pc, man pages
#   librpma0-arpma  librpma_runtime   librpma.so.0: the drop-in for Debian's librpma0
#   arpma-tools     arpma_tools       arpma-perf
#
# The drop-in and the -dev package take the place of Debian's librpma0 and librpma-dev, whose
# files they ship under the same names: each Provides the package it replaces, and Conflicts
# with and Replaces it, which is how Debian policy (7.6.2) lets dpkg remove the old package
# when the new one is installed. The provided version is the librpma API level arpma
# implements (ARPMA_RPMA_API_VERSION, cmake/ArpmaInstall.cmake, as librpma.pc says), so a
# program built against Debian's librpma (Depends: librpma0 (>= 1.2.0), from librpma0's
# shlibs file) installs and runs on the drop-in unchanged.
# Dependencies on system libraries come from dpkg-shlibdeps (dpkg-dev); the package preset
# builds shared libraries (BUILD_SHARED_LIBS=ON), installs under /usr and strips the binaries.
# Only from a shared build: a static libarpma.a would leave libarpma0 empty.
if(NOT PROJECT_IS_TOP_LEVEL OR NOT ARPMA_INSTALL OR NOT BUILD_SHARED_LIBS)
  return()
endif()

set(_arpma_deb_version "${PROJECT_VERSION}-1")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME arpma)
set(CPACK_PACKAGE_VENDOR arpma)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# Empty: each package's description below starts with its own synopsis line, which CPack
# would otherwise push down under the project's one.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "")
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/deb)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL arpma_runtime arpma_development librpma_runtime)
if(ARPMA_BUILD_TOOLS)
  list(APPEND CPACK_COMPONENTS_ALL arpma_tools)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "arpma maintainers <arpma@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# arpma-perf needs libarpma.so.0 of this build, which no installed package describes yet.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/src)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

# libarpma0
set(CPACK_DEBIAN_ARPMA_RUNTIME_PACKAGE_NAME libarpma0)
set(CPACK_DEBIAN_ARPMA_RUNTIME_DESCRIPTION
    "asynchronous RDMA connections on Boost.Asio (runtime)
arpma re-implements librpma 1.3 (Remote Persistent Memory Access) on Boost.Asio:
resolving, connecting, accepting and completions run through async handlers.
This package holds libarpma.so.0, with the C++ API and the librpma C API.")

# libarpma-dev: its librpma.h, librpma.pc, librpma.so and man pages are librpma-dev's files.
set(CPACK_DEBIAN_ARPMA_DEVELOPMENT_PACKAGE_NAME libarpma-dev)
set(CPACK_DEBIAN_ARPMA_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(_arpma_dev_depends "libarpma0 (= ${_arpma_deb_version})")
if(ARPMA_DROP_IN_INSTALLED)
  string(APPEND _arpma_dev_depends ", librpma0-arpma (= ${_arpma_deb_version})")
  set(CPACK_DEBIAN_ARPMA_DEVELOPMENT_PACKAGE_PROVIDES
      "librpma-dev (= ${ARPMA_RPMA_API_VERSION})")
  set(CPACK_DEBIAN_ARPMA_DEVELOPMENT_PACKAGE_CONFLICTS librpma-dev)
  set(CPACK_DEBIAN_ARPMA_DEVELOPMENT_PACKAGE_REPLACES librpma-dev)
endif()
# The public C++ headers need Boost.Asio; librpma.h needs verbs.h; a static link needs rdmacm.
string(APPEND _arpma_dev_depends ", libboost1.81-dev, libibverbs-dev, librdmacm-dev")
set(CPACK_DEBIAN_ARPMA_DEVELOPMENT_PACKAGE_DEPENDS "${_arpma_dev_depends}")
set(CPACK_DEBIAN_ARPMA_DEVELOPMENT_DESCRIPTION
    "asynchronous RDMA connections on Boost.Asio (development files)
Headers of the C++ API (arpma/*.hpp) and of the librpma C API (librpma.h),
the CMake package (find_package(arpma)), pkg-config files arpma.pc and
librpma.pc, and the librpma man pages. Takes the place of librpma-dev.")

# librpma0-arpma: the drop-in.
set(CPACK_DEBIAN_LIBRPMA_RUNTIME_PACKAGE_NAME librpma0-arpma)
set(CPACK_DEBIAN_LIBRPMA_RUNTIME_PACKAGE_PROVIDES "librpma0 (= ${ARPMA_RPMA_API_VERSION})")
set(CPACK_DEBIAN_LIBRPMA_RUNTIME_PACKAGE_CONFLICTS librpma0)
set(CPACK_DEBIAN_LIBRPMA_RUNTIME_PACKAGE_REPLACES librpma0)
set(CPACK_DEBIAN_LIBRPMA_RUNTIME_DESCRIPTION
    "librpma 1.x drop-in built from arpma (runtime)
librpma.so.0 with librpma's symbol versions (LIBRPMA_1.0), implemented by
arpma: programs built against librpma run on it unchanged. Takes the place
of librpma0.")

# arpma-tools
set(CPACK_DEBIAN_ARPMA_TOOLS_PACKAGE_NAME arpma-tools)
set(CPACK_DEBIAN_ARPMA_TOOLS_PACKAGE_SECTION net)
set(CPACK_DEBIAN_ARPMA_TOOLS_PACKAGE_DEPENDS "libarpma0 (= ${_arpma_deb_version})")
set(CPACK_DEBIAN_ARPMA_TOOLS_DESCRIPTION
    "asynchronous RDMA connections on Boost.Asio (tools)
arpma-perf: latency and bandwidth of RDMA writes, reads, sends and flushes
over arpma, on rdma-core or on arpma's soft provider.")

include(CPack)
