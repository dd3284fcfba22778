# tvmffi_jit_add_module(<target>
#     MANIFEST <file.json>            manifest (relative to CMAKE_CURRENT_SOURCE_DIR)
#     [SOURCES <file>...]             extra sources, added to the manifest's
#     [ARCH <arch>...]                CUDA architectures (8.0, 9.0a, 10.0f, 9.0+PTX); default: the
#                                     manifest's cuda_arch, else CMAKE_CUDA_ARCHITECTURES (80 -> 8.0+PTX,
#                                     90a-real -> 9.0a, native -> the GPUs), else TVM_FFI_CUDA_ARCH_LIST
#                                     at build time, else the GPUs
#     [EMIT module|object|cubin|fatbin|ptx]
#     [OUTPUT <path>]                 where the artifact goes (relative to CMAKE_CURRENT_BINARY_DIR);
#                                     default: <binary dir>/<manifest name>.<so|o|cubin|fatbin|ptx>
#     [OPTIONS <arg>...]              more `tvmffi-jit build` arguments (--cflag=-DX=1, -j 4, ...)
#     [DEPENDS <file-or-target>...]   more dependencies of the build step
#     [EXCLUDE_FROM_ALL])
#
# Adds a custom command that runs `tvmffi-jit build -m <manifest> -o <output>
# --depfile <output>.d` and a custom target <target> that depends on it. The
# depfile lists the manifest, every source, embedded file and header the
# compilers read, so editing any of them rebuilds the module and nothing else
# does; tvmffi-jit's cache makes a rebuild of unchanged inputs a copy.
#
# The artifact path is the target's TVMFFI_JIT_ARTIFACT property (use
# $<TARGET_PROPERTY:<target>,TVMFFI_JIT_ARTIFACT>) and the variable
# <target>_ARTIFACT in the caller's scope.
#
# Needs CMake >= 3.20 (DEPFILE with the Makefile generators) and the Ninja or
# Makefile generators.

# CMAKE_CUDA_ARCHITECTURES ("80;90a-real", "86-virtual", "native") as a
# tvmffi-jit --arch list ("8.0+PTX,9.0a,8.6+PTX"), in <out>; empty when it
# leaves the choice to tvmffi-jit. CMake's plain "80" means SASS and PTX (so
# +PTX), "-real" SASS only; tvmffi-jit has no PTX-only entry, so "-virtual"
# also gets the SASS. "native" is what tvmffi-jit does anyway (the visible
# GPUs); "all" and "all-major" depend on the nvcc version and are refused.
function(_tvmffi_jit_cmake_cuda_archs out target value)
  set(archs "")
  if(value STREQUAL "native" OR NOT value)
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  foreach(entry IN LISTS value)
    if(entry MATCHES "^([0-9]+)([0-9])([af]?)(-real|-virtual)?$")
      set(arch "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}${CMAKE_MATCH_3}")
      if(NOT CMAKE_MATCH_4 STREQUAL "-real")
        string(APPEND arch "+PTX")
      endif()
      list(APPEND archs "${arch}")
    else()
      message(FATAL_ERROR "tvmffi_jit_add_module(${target}): CMAKE_CUDA_ARCHITECTURES entry \"${entry}\" has no "
                          "tvmffi-jit equivalent (expected 80, 90a, 100f-real, 86-virtual or native); pass ARCH")
    endif()
  endforeach()
  list(JOIN archs "," joined)
  set(${out} "${joined}" PARENT_SCOPE)
endfunction()

cmake_policy(PUSH)
cmake_policy(VERSION 3.20)
# Policy settings are recorded when a function is defined: CMP0116 (depfiles
# transformed for Ninja, 3.20) applies to every call whatever the caller's
# cmake_minimum_required says.
function(tvmffi_jit_add_module target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "EXCLUDE_FROM_ALL" "MANIFEST;OUTPUT;EMIT" "SOURCES;ARCH;OPTIONS;DEPENDS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tvmffi_jit_add_module(${target}): unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_MANIFEST)
    message(FATAL_ERROR "tvmffi_jit_add_module(${target}): MANIFEST <file.json> is required")
  endif()
  if(NOT TARGET tvmffi_jit::tvmffi-jit)
    message(FATAL_ERROR "tvmffi_jit_add_module(${target}): call find_package(tvmffi_jit) first")
  endif()
  if(CMAKE_VERSION VERSION_LESS 3.20)
    message(FATAL_ERROR "tvmffi_jit_add_module needs CMake 3.20 or newer (DEPFILE support)")
  endif()
  if(NOT CMAKE_GENERATOR MATCHES "Ninja|Makefiles")
    message(FATAL_ERROR "tvmffi_jit_add_module: the ${CMAKE_GENERATOR} generator cannot use depfiles; "
                        "use Ninja or a Makefile generator")
  endif()

  get_filename_component(manifest "${arg_MANIFEST}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${manifest}")
    message(FATAL_ERROR "tvmffi_jit_add_module(${target}): no manifest ${manifest}")
  endif()
  # Re-run CMake when the manifest changes, so a new name or emit kind moves the default output.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${manifest}")

  set(emit "${arg_EMIT}")
  file(READ "${manifest}" manifest_text)
  if(arg_OUTPUT)
    get_filename_component(output "${arg_OUTPUT}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  else()
    string(JSON module_name ERROR_VARIABLE json_error GET "${manifest_text}" name)
    if(json_error)
      message(FATAL_ERROR "tvmffi_jit_add_module(${target}): ${manifest}: no \"name\" (${json_error}); "
                          "fix the manifest or pass OUTPUT")
    endif()
    if(NOT emit)
      string(JSON emit ERROR_VARIABLE json_error GET "${manifest_text}" emit)
      if(json_error)
        set(emit module)
      endif()
    endif()
    set(suffix_module .so)
    set(suffix_object .o)
    set(suffix_cubin .cubin)
    set(suffix_fatbin .fatbin)
    set(suffix_ptx .ptx)
    if(NOT DEFINED suffix_${emit})
      message(FATAL_ERROR "tvmffi_jit_add_module(${target}): unknown EMIT ${emit} "
                          "(expected module, object, cubin, fatbin or ptx)")
    endif()
    set(output "${CMAKE_CURRENT_BINARY_DIR}/${module_name}${suffix_${emit}}")
  endif()

  set(sources "")
  foreach(s IN LISTS arg_SOURCES)
    get_filename_component(s "${s}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND sources "${s}")
  endforeach()

  set(command tvmffi_jit::tvmffi-jit build -q -m "${manifest}" ${sources})
  set(arch_list "")
  if(arg_ARCH)
    list(JOIN arg_ARCH "," arch_list)
  else()
    # The manifest's own cuda_arch is specific to this module and wins over
    # the project-wide CMAKE_CUDA_ARCHITECTURES, as a target property would.
    string(JSON manifest_arch ERROR_VARIABLE no_manifest_arch GET "${manifest_text}" cuda_arch)
    if(no_manifest_arch AND DEFINED CMAKE_CUDA_ARCHITECTURES)
      _tvmffi_jit_cmake_cuda_archs(arch_list ${target} "${CMAKE_CUDA_ARCHITECTURES}")
    endif()
  endif()
  if(arch_list)
    list(APPEND command "--arch=${arch_list}")
  endif()
  if(arg_EMIT)
    list(APPEND command "--emit=${arg_EMIT}")
  endif()
  list(APPEND command ${arg_OPTIONS} "--output=${output}" "--depfile=${output}.d")

  get_filename_component(output_name "${output}" NAME)
  add_custom_command(
    OUTPUT "${output}"
    COMMAND ${command}
    DEPENDS "${manifest}" ${sources} ${arg_DEPENDS} "$<TARGET_FILE:tvmffi_jit::tvmffi-jit>"
    DEPFILE "${output}.d"
    COMMENT "tvmffi-jit: building ${output_name}"
    VERBATIM
    COMMAND_EXPAND_LISTS)

  if(arg_EXCLUDE_FROM_ALL)
    add_custom_target(${target} DEPENDS "${output}")
  else()
    add_custom_target(${target} ALL DEPENDS "${output}")
  endif()
  set_target_properties(${target} PROPERTIES TVMFFI_JIT_ARTIFACT "${output}")
  set(${target}_ARTIFACT "${output}" PARENT_SCOPE)
endfunction()
cmake_policy(POP)
