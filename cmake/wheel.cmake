# The pip build (scikit-build-core, pyproject.toml): this project configured
# and built as a second tree, <build-dir>-tree (build-wheel-tree/ beside
# build-wheel/), whose outputs the wheel installs.
#
# Why a second tree: scikit-build-core records the folder it runs from
# (.skbuild-info.json) and, when it changes, deletes CMakeCache.txt and the
# whole CMakeFiles/ folder of the build dir before configuring. With pip's build
# isolation it changes on every run (a new /tmp/pip-build-env-*), and
# CMakeFiles/<target>.dir/ is where the Ninja generator puts every object file:
# a second `pip wheel .` recompiled all of them. The second tree lives outside
# that CMakeFiles/, keeps its own cache, objects and .ninja_log, so a second
# run reconfigures (the wheel's staging folders are new paths; they reach
# install rules only) and recompiles nothing that did not change.
#
# Why beside the build dir rather than in it (where it was first): at the
# checkout's top, the tree is as deep as a developer's build/, so with CCACHE_BASEDIR at the checkout
# (scripts/test.sh) its compile commands name the sources by the same relative
# paths (../src/...) and a Release build/ with the same options (scripts/test.sh
# builds one) has already put every object of the wheel in ccache.
include(ExternalProject)

set(_tree ${CMAKE_BINARY_DIR}-tree)

# Everything the pip user set (pyproject's cmake.define, --config-settings
# cmake.define.X=...) reaches the tree: this project's options and the build type.
set(_args -DCMAKE_BUILD_TYPE:STRING=${CMAKE_BUILD_TYPE}
          -DCMAKE_C_COMPILER:FILEPATH=${CMAKE_C_COMPILER}
          -DCMAKE_CXX_COMPILER:FILEPATH=${CMAKE_CXX_COMPILER}
          -DCMAKE_MAKE_PROGRAM:FILEPATH=${CMAKE_MAKE_PROGRAM}
          -DTVMFFI_JIT_WHEEL_SCRIPTS_DIR:PATH=${SKBUILD_SCRIPTS_DIR}
          -DTVMFFI_JIT_WHEEL_PLATLIB_DIR:PATH=${SKBUILD_PLATLIB_DIR})
get_cmake_property(_cache_vars CACHE_VARIABLES)
foreach(_var IN LISTS _cache_vars)
  if(_var MATCHES "^TVMFFI_JIT_" AND NOT _var MATCHES "^TVMFFI_JIT_WHEEL_")
    list(APPEND _args "-D${_var}=${${_var}}")
  endif()
endforeach()

# The tree compiles through ccache when it is installed and no launcher was
# chosen: `pip install .` in a fresh clone, or after `git clean`, then compiles
# only what ccache has not seen.
foreach(_lang C CXX)
  if(DEFINED CMAKE_${_lang}_COMPILER_LAUNCHER)
    list(APPEND _args "-DCMAKE_${_lang}_COMPILER_LAUNCHER=${CMAKE_${_lang}_COMPILER_LAUNCHER}")
  elseif(NOT DEFINED ENV{CMAKE_${_lang}_COMPILER_LAUNCHER})
    find_program(TVMFFI_JIT_WHEEL_CCACHE ccache)
    if(TVMFFI_JIT_WHEEL_CCACHE)
      list(APPEND _args "-DCMAKE_${_lang}_COMPILER_LAUNCHER=${TVMFFI_JIT_WHEEL_CCACHE}")
    endif()
  endif()
endforeach()

ExternalProject_Add(tvmffi_jit_tree
  SOURCE_DIR ${CMAKE_CURRENT_SOURCE_DIR}
  BINARY_DIR ${_tree}
  # Step stamps beside the tree, not under CMakeFiles/ either.
  PREFIX ${CMAKE_BINARY_DIR}/tree-steps
  CMAKE_ARGS ${_args}
  # The tree's own ninja decides what is out of date; its progress also goes
  # to the terminal, which pip's captured output does not reach without -v.
  BUILD_COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cmake/wheel-build-progress.sh ${CMAKE_COMMAND} ${_tree}
  BUILD_ALWAYS ON
  USES_TERMINAL_CONFIGURE ON
  USES_TERMINAL_BUILD ON
  INSTALL_COMMAND "")

# `cmake --install` of the outer build (scikit-build-core, with its prefix and
# --strip) runs the tree's install rules: the binary to the wheel's scripts,
# the engine library beside the package, the data files under the prefix.
install(SCRIPT ${_tree}/cmake_install.cmake)
