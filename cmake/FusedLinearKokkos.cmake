# SPDX-License-Identifier: Apache-2.0
# Kokkos and Kokkos Kernels for FusedLinear: the parent project's targets, else installed packages,
# else built inside this build from source (add_subdirectory, as kokkos-fft's
# KokkosFFT_ENABLE_INTERNAL_KOKKOS does), with the backends the user names (-DKokkos_ENABLE_CUDA=ON,
# -DKokkos_ARCH_HOPPER90=ON, ...) and the patch cmake/patches/ has for the version.
#
# Included twice by the top-level CMakeLists.txt: before project(), where a CUDA build of the
# internal Kokkos needs its nvcc_wrapper as the C++ compiler (FUSED_LINEAR_KOKKOS_STAGE "compiler"),
# and after it, to find or build the packages ("packages").

set(FusedLinear_INTERNAL_KOKKOS "AUTO" CACHE STRING
    "Build Kokkos and Kokkos Kernels from FusedLinear_KOKKOS_SOURCE and FusedLinear_KOKKOS_KERNELS_SOURCE: AUTO (when none is installed), ON, OFF")
set_property(CACHE FusedLinear_INTERNAL_KOKKOS PROPERTY STRINGS AUTO ON OFF)
set(FusedLinear_KOKKOS_SOURCE
    "https://github.com/kokkos/kokkos/releases/download/4.6.01/kokkos-4.6.01.tar.gz" CACHE STRING
    "Kokkos to build when none is installed: a URL, a .tar.gz or a source directory")
set(FusedLinear_KOKKOS_KERNELS_SOURCE
    "https://github.com/kokkos/kokkos-kernels/releases/download/4.6.02/kokkos-kernels-4.6.02.tar.gz"
    CACHE STRING "Kokkos Kernels to build with it: a URL, a .tar.gz or a source directory")
set(FusedLinear_KOKKOS_SHA256 "" CACHE STRING
    "SHA-256 of FusedLinear_KOKKOS_SOURCE's archive (known for the default release archives)")
set(FusedLinear_KOKKOS_KERNELS_SHA256 "" CACHE STRING
    "SHA-256 of FusedLinear_KOKKOS_KERNELS_SOURCE's archive (known for the default release archives)")
if(NOT FusedLinear_INTERNAL_KOKKOS MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "FusedLinear_INTERNAL_KOKKOS must be AUTO, ON or OFF, got '${FusedLinear_INTERNAL_KOKKOS}'")
endif()

# The upstream tags' release archives, by file name: a copy of one anywhere is checked too.
set(_fused_linear_sha256_kokkos-4.6.01.tar.gz
    b9d70e4653b87a06dbb48d63291bf248058c7c7db4bd91979676ad5609bb1a3a)
set(_fused_linear_sha256_kokkos-kernels-4.6.02.tar.gz
    a953f445660ed5aaab10e18fc4a90c4c178291e9d9d97d20abd4e6027f1193ec)

# A patched copy of SOURCE in <build>/_deps/NAME-src (the source itself is never written to),
# made again only when the source, its checksum or the patch change. NAME is kokkos or
# kokkos-kernels; PREFIX the prefix of the version variables in its top-level CMakeLists.txt.
function(fused_linear_kokkos_fetch name prefix source sha256 out_dir)
  set(deps "${CMAKE_BINARY_DIR}/_deps")
  set(dest "${deps}/${name}-src")
  string(TOUPPER "FusedLinear_${name}_SOURCE" option)
  string(REPLACE "-" "_" option "${option}")
  string(REPLACE "FUSEDLINEAR" "FusedLinear" option "${option}")
  get_filename_component(file_name "${source}" NAME)
  if(NOT sha256 AND NOT IS_DIRECTORY "${source}")
    get_filename_component(sums "${source}/../SHA256SUMS" ABSOLUTE)
    if(NOT source MATCHES "^[a-z]+://" AND EXISTS "${sums}")
      file(STRINGS "${sums}" lines REGEX "^[0-9a-f]+ +\\*?${file_name}$")
      if(NOT lines)
        message(FATAL_ERROR "FusedLinear: ${source} is not listed in ${sums}")
      endif()
      list(GET lines 0 line)
      string(REGEX REPLACE " .*" "" sha256 "${line}")
    elseif(DEFINED _fused_linear_sha256_${file_name})
      set(sha256 "${_fused_linear_sha256_${file_name}}")
    endif()
  endif()
  set(id "${source} ${sha256}")
  if(EXISTS "${dest}/.fused-linear-source" AND EXISTS "${dest}/.fused-linear-patch")
    file(READ "${dest}/.fused-linear-source" old_id)
    file(READ "${dest}/.fused-linear-patch" old_patch)
    if(old_id STREQUAL id)
      fused_linear_kokkos_patch_for(${name} ${prefix} "${dest}" patch patch_id)
      if(old_patch STREQUAL patch_id)
        set(${out_dir} "${dest}" PARENT_SCOPE)
        return()
      endif()
    endif()
  endif()

  file(REMOVE_RECURSE "${dest}" "${dest}.tmp")
  file(MAKE_DIRECTORY "${dest}.tmp")
  set(archive "${source}")
  if(source MATCHES "^[a-z]+://")
    set(archive "${deps}/${file_name}")
    set(hash_args)
    if(sha256)
      set(hash_args EXPECTED_HASH SHA256=${sha256})
    endif()
    message(STATUS "FusedLinear: downloading ${source}")
    file(DOWNLOAD "${source}" "${archive}" ${hash_args} STATUS status)
    list(GET status 0 rc)
    if(NOT rc EQUAL 0)
      list(GET status 1 why)
      message(FATAL_ERROR "FusedLinear: cannot download ${source} (${why}). Without a network, "
                          "give the archive's path: -D${option}=/path/to/${file_name}")
    endif()
  elseif(NOT EXISTS "${source}")
    message(FATAL_ERROR "FusedLinear: ${source} does not exist (expected a URL, a .tar.gz or a directory)")
  endif()
  if(IS_DIRECTORY "${archive}")
    file(COPY "${archive}/" DESTINATION "${dest}.tmp" PATTERN ".git" EXCLUDE)
    set(top "${dest}.tmp")
  else()
    if(sha256)
      file(SHA256 "${archive}" actual)
      if(NOT actual STREQUAL sha256)
        message(FATAL_ERROR "FusedLinear: ${archive} has SHA-256 ${actual}, expected ${sha256}")
      endif()
      message(STATUS "FusedLinear: ${file_name}: SHA-256 checked")
    else()
      message(STATUS "FusedLinear: ${file_name}: no SHA-256 known, not checked")
    endif()
    execute_process(COMMAND "${CMAKE_COMMAND}" -E tar xzf "${archive}"
                    WORKING_DIRECTORY "${dest}.tmp" RESULT_VARIABLE rc)
    file(GLOB tops LIST_DIRECTORIES true "${dest}.tmp/*")
    list(LENGTH tops n)
    if(NOT rc EQUAL 0 OR NOT n EQUAL 1)
      message(FATAL_ERROR "FusedLinear: ${archive} is not a .tar.gz with one top-level folder")
    endif()
    set(top "${tops}")
  endif()
  if(NOT EXISTS "${top}/CMakeLists.txt")
    message(FATAL_ERROR "FusedLinear: ${source} has no top-level CMakeLists.txt")
  endif()
  fused_linear_kokkos_patch_for(${name} ${prefix} "${top}" patch patch_id)
  if(patch)
    find_program(FusedLinear_PATCH_PROGRAM patch)
    if(NOT FusedLinear_PATCH_PROGRAM)
      message(FATAL_ERROR "FusedLinear: ${patch} must be applied to ${name}, and there is no "
                          "`patch` program (Debian: apt-get install patch)")
    endif()
    execute_process(COMMAND "${FusedLinear_PATCH_PROGRAM}" -s -p1 -d "${top}" -i "${patch}"
                    RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "FusedLinear: ${patch} does not apply to ${source}")
    endif()
    message(STATUS "FusedLinear: applied ${patch_id}")
  endif()
  file(RENAME "${top}" "${dest}")
  file(REMOVE_RECURSE "${dest}.tmp")
  file(WRITE "${dest}/.fused-linear-source" "${id}")
  file(WRITE "${dest}/.fused-linear-patch" "${patch_id}")
  set(${out_dir} "${dest}" PARENT_SCOPE)
endfunction()

# The patch cmake/patches/NAME-<version>-*.patch for the version DIR declares (X.Y.ZZ, as the
# release tags spell it), if any; PATCH_ID also names its contents, so that an edit re-applies it.
function(fused_linear_kokkos_patch_for name prefix dir out_patch out_id)
  file(STRINGS "${dir}/CMakeLists.txt" lines
       REGEX "^[ \t]*[sS][eE][tT][ \t]*\\([ \t]*${prefix}_VERSION_(MAJOR|MINOR|PATCH)[ \t]+[0-9]+")
  foreach(part MAJOR MINOR PATCH)
    set(v_${part})
    foreach(line IN LISTS lines)
      if(line MATCHES "${prefix}_VERSION_${part}[ \t]+([0-9]+)" AND NOT DEFINED v_${part})
        math(EXPR v_${part} "${CMAKE_MATCH_1}")
      endif()
    endforeach()
    if(NOT DEFINED v_${part})
      message(FATAL_ERROR "FusedLinear: ${dir}/CMakeLists.txt declares no ${prefix}_VERSION_${part}")
    endif()
  endforeach()
  if(v_PATCH LESS 10)
    set(v_PATCH "0${v_PATCH}")
  endif()
  set(version "${v_MAJOR}.${v_MINOR}.${v_PATCH}")
  file(GLOB patches "${FusedLinear_SOURCE_ROOT}/cmake/patches/${name}-${version}-*.patch")
  list(LENGTH patches n)
  if(n GREATER 1)
    message(FATAL_ERROR "FusedLinear: more than one patch for ${name} ${version}: ${patches}")
  endif()
  set(${out_patch} "${patches}" PARENT_SCOPE)
  if(patches)
    file(SHA256 "${patches}" sum)
    get_filename_component(patch_name "${patches}" NAME)
    set(${out_id} "${name} ${version}, ${patch_name} ${sum}" PARENT_SCOPE)
  else()
    set(${out_id} "${name} ${version}, no patch" PARENT_SCOPE)
  endif()
endfunction()

set(FusedLinear_SOURCE_ROOT "${CMAKE_CURRENT_LIST_DIR}/..")

if(FUSED_LINEAR_KOKKOS_STAGE STREQUAL "compiler")
  # CUDA through the internal Kokkos: its nvcc_wrapper compiles everything, and the compiler is
  # chosen by project(), so the source is unpacked (and patched: CUDA 13 needs it) first.
  if(Kokkos_ENABLE_CUDA AND NOT CMAKE_CXX_COMPILER AND NOT DEFINED ENV{CXX}
     AND NOT FusedLinear_INTERNAL_KOKKOS STREQUAL "OFF" AND NOT TARGET Kokkos::kokkos)
    fused_linear_kokkos_fetch(kokkos Kokkos "${FusedLinear_KOKKOS_SOURCE}"
                              "${FusedLinear_KOKKOS_SHA256}" _fused_linear_kokkos_src)
    set(CMAKE_CXX_COMPILER "${_fused_linear_kokkos_src}/bin/nvcc_wrapper" CACHE FILEPATH
        "C++ compiler (the internal Kokkos' nvcc_wrapper)")
    message(STATUS "FusedLinear: C++ compiler ${CMAKE_CXX_COMPILER}")
  endif()
  return()
endif()

# ---------------------------------------------------------------- find, else build
set(FusedLinear_KOKKOS_INTERNAL OFF)  # Kokkos built here (the package config then looks beside it)
set(FusedLinear_KOKKOS_KERNELS_INTERNAL OFF)
if(NOT TARGET Kokkos::kokkos)
  if(FusedLinear_INTERNAL_KOKKOS STREQUAL "OFF")
    find_package(Kokkos REQUIRED)
  elseif(FusedLinear_INTERNAL_KOKKOS STREQUAL "AUTO")
    find_package(Kokkos QUIET)
  endif()
  if(Kokkos_FOUND)
    message(STATUS "FusedLinear: the installed Kokkos ${Kokkos_VERSION} at ${Kokkos_DIR}")
  else()
    set(FusedLinear_KOKKOS_INTERNAL ON)
  endif()
endif()
if(NOT TARGET Kokkos::kokkoskernels)
  if(NOT FusedLinear_KOKKOS_INTERNAL AND FusedLinear_INTERNAL_KOKKOS STREQUAL "OFF")
    find_package(KokkosKernels REQUIRED)
  elseif(NOT FusedLinear_KOKKOS_INTERNAL AND FusedLinear_INTERNAL_KOKKOS STREQUAL "AUTO")
    find_package(KokkosKernels QUIET)
  endif()
  if(NOT KokkosKernels_FOUND)
    set(FusedLinear_KOKKOS_KERNELS_INTERNAL ON)
  endif()
endif()

if(FusedLinear_KOKKOS_INTERNAL OR FusedLinear_KOKKOS_KERNELS_INTERNAL)
  # Static (their default, unless BUILD_SHARED_LIBS says otherwise) and position-independent: the
  # PyTorch extension links them into its module.
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)
endif()
if(FusedLinear_KOKKOS_INTERNAL)
  fused_linear_kokkos_fetch(kokkos Kokkos "${FusedLinear_KOKKOS_SOURCE}"
                            "${FusedLinear_KOKKOS_SHA256}" _fused_linear_kokkos_src)
  message(STATUS "FusedLinear: building Kokkos from ${FusedLinear_KOKKOS_SOURCE} "
                 "(an installed one is used where CMAKE_PREFIX_PATH has it, unless FusedLinear_INTERNAL_KOKKOS=ON)")
  add_subdirectory("${_fused_linear_kokkos_src}" "${CMAKE_BINARY_DIR}/_deps/kokkos-build")
  # As installed packages report them (a subdirectory leaves them in its own scope).
  get_directory_property(Kokkos_VERSION DIRECTORY "${_fused_linear_kokkos_src}" DEFINITION Kokkos_VERSION)
  get_directory_property(Kokkos_DEVICES DIRECTORY "${_fused_linear_kokkos_src}"
                         DEFINITION KOKKOS_ENABLED_DEVICES)
endif()
if(FusedLinear_KOKKOS_KERNELS_INTERNAL)
  # Only the BLAS component, no explicit instantiations of its own (FusedLinear instantiates the
  # gemm it calls), no CUDA libraries but cuBLAS. The user's -D options win over these defaults.
  foreach(_fused_linear_default
          "KokkosKernels_ENABLE_ALL_COMPONENTS;OFF" "KokkosKernels_ENABLE_COMPONENT_BLAS;ON"
          "KokkosKernels_ADD_DEFAULT_ETI;OFF" "KokkosKernels_INST_FLOAT;OFF"
          "KokkosKernels_INST_DOUBLE;OFF" "KokkosKernels_INST_COMPLEX_FLOAT;OFF"
          "KokkosKernels_INST_COMPLEX_DOUBLE;OFF" "KokkosKernels_INST_LAYOUTLEFT;OFF"
          "KokkosKernels_INST_LAYOUTRIGHT;OFF" "KokkosKernels_INST_OFFSET_INT;OFF"
          "KokkosKernels_INST_OFFSET_SIZE_T;OFF" "KokkosKernels_INST_ORDINAL_INT;OFF"
          "KokkosKernels_ENABLE_TPL_CUSPARSE;OFF" "KokkosKernels_ENABLE_TPL_CUSOLVER;OFF")
    list(GET _fused_linear_default 0 _fused_linear_name)
    list(GET _fused_linear_default 1 _fused_linear_value)
    if(NOT DEFINED ${_fused_linear_name})
      set(${_fused_linear_name} ${_fused_linear_value} CACHE BOOL "(FusedLinear's default)")
    endif()
  endforeach()
  fused_linear_kokkos_fetch(kokkos-kernels KokkosKernels "${FusedLinear_KOKKOS_KERNELS_SOURCE}"
                            "${FusedLinear_KOKKOS_KERNELS_SHA256}" _fused_linear_kernels_src)
  message(STATUS "FusedLinear: building Kokkos Kernels from ${FusedLinear_KOKKOS_KERNELS_SOURCE}")
  add_subdirectory("${_fused_linear_kernels_src}" "${CMAKE_BINARY_DIR}/_deps/kokkos-kernels-build")
  get_directory_property(KokkosKernels_VERSION DIRECTORY "${_fused_linear_kernels_src}"
                         DEFINITION KokkosKernels_VERSION)
endif()
