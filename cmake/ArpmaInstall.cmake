# Install rules and package metadata, included from the top-level CMakeLists.txt after src/.
#
#   cmake --install <build> [--prefix <dir>]
#
# installs, under the GNUInstallDirs places of CMAKE_INSTALL_PREFIX:
#   include/librpma.h, include/arpma/**.hpp          headers
#   lib/libarpma.a, or libarpma.so.0.1.0 (SONAME libarpma.so.0) with BUILD_SHARED_LIBS=ON
#   lib/cmake/arpma/arpma{Config,ConfigVersion,Targets}.cmake
#                                                     find_package(arpma 0.1 CONFIG)
#   lib/librpma.so.0.<version> (SONAME librpma.so.0, LIBRPMA_1.0 symbol versions) and the
#   librpma.so link: the C API as librpma's drop-in, so that `-lrpma` and `pkg-config
#   librpma` link arpma (ARPMA_INSTALL_LIBRPMA, on by default; off where Debian's librpma
#   stays: then neither it nor librpma.pc is installed)
#   lib/pkgconfig/arpma.pc, lib/pkgconfig/librpma.pc  pkg-config
#   share/man/man3/rpma_*.3, share/man/man7/librpma.7 (cmake/ArpmaDocs.cmake)
#
# Imported targets of the package:
#   arpma::arpma  the library: C++ API (include/arpma/*.hpp) and C API (librpma.h); its
#                 include directory is $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
#   arpma::rpma   the C API. For now an INTERFACE target that links arpma::arpma (the one
#                 library holds both APIs); a separate librpma.so.0 compatibility library
#                 can take its place without changing consumers.
# The version lives in one place: project(arpma VERSION ...) in the top-level CMakeLists.txt.

include(CMakePackageConfigHelpers)

option(ARPMA_INSTALL "Generate the install rules (headers, library, package files)"
       ${PROJECT_IS_TOP_LEVEL})
set(ARPMA_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/arpma"
    CACHE STRING "Where arpmaConfig.cmake is installed (relative to the prefix)")
set(ARPMA_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig"
    CACHE STRING "Where arpma.pc and librpma.pc are installed (relative to the prefix)")
# Sanitizer builds have no drop-in (src/CMakeLists.txt): their librpma.pc links libarpma.
option(ARPMA_INSTALL_LIBRPMA
       "Install the C API as librpma.so.0 and librpma.pc (off: keep the system's librpma)" ON)
set(ARPMA_DROP_IN_INSTALLED OFF)
if(ARPMA_INSTALL_LIBRPMA AND TARGET rpma_abi)
  set(ARPMA_DROP_IN_INSTALLED ON)
endif()

# arpma::rpma: the C API's target (see above).
add_library(arpma_rpma INTERFACE)
add_library(arpma::rpma ALIAS arpma_rpma)
target_link_libraries(arpma_rpma INTERFACE arpma)
set_target_properties(arpma_rpma PROPERTIES EXPORT_NAME rpma)

# ---- pkg-config ---------------------------------------------------------------------------
# Relocatable: prefix is found from the .pc file's own place (${pcfiledir}), so a tree
# installed with `cmake --install --prefix <dir>` or staged with DESTDIR is consistent.
# Libs has Debian librpma.pc's shape (-L${libdir} -l<lib> -libverbs -lrdmacm); the library is
# C++, so a C program linked by cc also needs libstdc++: in Libs for a static libarpma.a,
# in Libs.private for a shared one (whose DT_NEEDED pulls it in).
function(arpma_pc_dir_var out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "\${prefix}/${dir}" PARENT_SCOPE)
  endif()
endfunction()
if(IS_ABSOLUTE "${ARPMA_INSTALL_PKGCONFIGDIR}")
  set(ARPMA_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _arpma_pc_up "/arpma-prefix/${ARPMA_INSTALL_PKGCONFIGDIR}" "/arpma-prefix")
  string(REGEX REPLACE "/$" "" _arpma_pc_up "${_arpma_pc_up}")
  set(ARPMA_PC_PREFIX "\${pcfiledir}/${_arpma_pc_up}")
endif()
arpma_pc_dir_var(ARPMA_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
arpma_pc_dir_var(ARPMA_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
set(ARPMA_PC_DEPLIBS "-libverbs -lrdmacm")
set(ARPMA_PC_CXXLIBS "-lstdc++ -lm -pthread")
if(BUILD_SHARED_LIBS)
  set(ARPMA_PC_LIBS "-L\${libdir} -larpma ${ARPMA_PC_DEPLIBS}")
  set(ARPMA_PC_LIBS_PRIVATE "${ARPMA_PC_CXXLIBS}")
else()
  set(ARPMA_PC_LIBS "-L\${libdir} -larpma ${ARPMA_PC_DEPLIBS} ${ARPMA_PC_CXXLIBS}")
  set(ARPMA_PC_LIBS_PRIVATE "")
endif()
# librpma.pc: the drop-in where it is installed, as Debian's librpma.pc has it.
if(ARPMA_DROP_IN_INSTALLED)
  set(ARPMA_RPMA_PC_LIBS "-L\${libdir} -lrpma ${ARPMA_PC_DEPLIBS}")
  set(ARPMA_RPMA_PC_LIBS_PRIVATE "${ARPMA_PC_CXXLIBS}")
else()
  set(ARPMA_RPMA_PC_LIBS "${ARPMA_PC_LIBS}")
  set(ARPMA_RPMA_PC_LIBS_PRIVATE "${ARPMA_PC_LIBS_PRIVATE}")
endif()
# librpma.pc states the librpma API level it provides, so a librpma program's version check
# (`pkg-config --atleast-version=1.0 librpma`, meson's dependency('librpma', version: ...))
# keeps working; its Description names arpma's version.
set(ARPMA_RPMA_API_VERSION 1.3.0)
configure_file(${CMAKE_CURRENT_LIST_DIR}/arpma.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/arpma.pc
               @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/librpma.pc.in
               ${PROJECT_BINARY_DIR}/pkgconfig/librpma.pc @ONLY)

# ---- CMake package ------------------------------------------------------------------------
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/arpmaConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/cmake/arpmaConfig.cmake
                              INSTALL_DESTINATION ${ARPMA_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/arpmaConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)

if(ARPMA_INSTALL)
  install(TARGETS arpma arpma_rpma EXPORT arpmaTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT arpma_development
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT arpma_runtime
                  NAMELINK_COMPONENT arpma_development
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT arpma_runtime)
  install(FILES ${PROJECT_SOURCE_DIR}/include/librpma.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT arpma_development)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/arpma
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT arpma_development
          FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
  install(EXPORT arpmaTargets NAMESPACE arpma:: DESTINATION ${ARPMA_INSTALL_CMAKEDIR}
          COMPONENT arpma_development)
  install(FILES ${PROJECT_BINARY_DIR}/cmake/arpmaConfig.cmake
                ${PROJECT_BINARY_DIR}/cmake/arpmaConfigVersion.cmake
          DESTINATION ${ARPMA_INSTALL_CMAKEDIR} COMPONENT arpma_development)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/arpma.pc
          DESTINATION ${ARPMA_INSTALL_PKGCONFIGDIR} COMPONENT arpma_development)
  if(ARPMA_INSTALL_LIBRPMA)
    install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/librpma.pc
            DESTINATION ${ARPMA_INSTALL_PKGCONFIGDIR} COMPONENT arpma_development)
  endif()
  if(ARPMA_DROP_IN_INSTALLED)
    install(TARGETS rpma_abi
            LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT librpma_runtime
                    NAMELINK_COMPONENT arpma_development)
  endif()
endif()
