# Install rules beyond the binary (which CMakeLists.txt installs): the man
# page, the manifest schema, shell completions (in tvmffi-jit's share folder
# and where bash-completion and zsh look), the examples, and a CMake package
# so projects can `find_package(tvmffi_jit)` and call tvmffi_jit_add_module().
include(CMakePackageConfigHelpers)

set(_tvmffi_jit_share ${CMAKE_CURRENT_SOURCE_DIR}/share/tvmffi-jit)

install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/man/tvmffi-jit.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${_tvmffi_jit_share}/manifest.schema.json ${_tvmffi_jit_share}/build.schema.json
              ${_tvmffi_jit_share}/cache.schema.json ${_tvmffi_jit_share}/inspect.schema.json
              ${_tvmffi_jit_share}/doctor.schema.json DESTINATION ${CMAKE_INSTALL_DATADIR}/tvmffi-jit)
install(DIRECTORY ${_tvmffi_jit_share}/completions ${_tvmffi_jit_share}/examples
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tvmffi-jit)
install(FILES ${_tvmffi_jit_share}/completions/tvmffi-jit.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME tvmffi-jit)
install(FILES ${_tvmffi_jit_share}/completions/_tvmffi-jit DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/site-functions)

set(TVMFFI_JIT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/tvmffi_jit)
# One template, two packages. The installed one finds everything relative to
# the install prefix. The build-tree one (<build>/cmake, found with
# -Dtvmffi_jit_DIR=<build>/cmake or CMAKE_PREFIX_PATH=<build>) uses the binary
# just built and the schema, examples and functions of this source tree, so a
# project can use tvmffi-jit without installing it.
set(TVMFFI_JIT_CONFIG_BINDIR ${CMAKE_INSTALL_BINDIR})
set(TVMFFI_JIT_CONFIG_DATADIR ${CMAKE_INSTALL_DATADIR})
configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/tvmffi_jitConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/cmake/install/tvmffi_jitConfig.cmake
  INSTALL_DESTINATION ${TVMFFI_JIT_INSTALL_CMAKEDIR}
  PATH_VARS TVMFFI_JIT_CONFIG_BINDIR TVMFFI_JIT_CONFIG_DATADIR)
set(TVMFFI_JIT_CONFIG_BINDIR ${CMAKE_BINARY_DIR})  # where tvmffi-jit is built (RUNTIME_OUTPUT_DIRECTORY)
set(TVMFFI_JIT_CONFIG_DATADIR ${CMAKE_CURRENT_SOURCE_DIR}/share)
configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/tvmffi_jitConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/cmake/tvmffi_jitConfig.cmake
  INSTALL_DESTINATION cmake
  INSTALL_PREFIX ${CMAKE_CURRENT_BINARY_DIR}
  PATH_VARS TVMFFI_JIT_CONFIG_BINDIR TVMFFI_JIT_CONFIG_DATADIR)
configure_file(${CMAKE_CURRENT_LIST_DIR}/tvmffi_jit_functions.cmake
               ${CMAKE_CURRENT_BINARY_DIR}/cmake/tvmffi_jit_functions.cmake COPYONLY)
# 0.x: minor versions may change the CLI, so only the same minor is compatible.
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/cmake/tvmffi_jitConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/cmake/install/tvmffi_jitConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/cmake/tvmffi_jitConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/tvmffi_jit_functions.cmake
  DESTINATION ${TVMFFI_JIT_INSTALL_CMAKEDIR})
