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
    "SHA-256 of FusedLinear_KOKKOS_SOURCE's archive (known for the release archives); UNCHECKED: none")
set(FusedLinear_KOKKOS_KERNELS_SHA256 "" CACHE STRING
    "SHA-256 of FusedLinear_KOKKOS_KERNELS_SOURCE's archive (known for the release archives); UNCHECKED: none")
if(NOT FusedLinear_INTERNAL_KOKKOS MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "FusedLinear_INTERNAL_KOKKOS must be AUTO, ON or OFF, got '${FusedLinear_INTERNAL_KOKKOS}'")
endif()

include("${CMAKE_CURRENT_LIST_DIR}/FusedLinearKokkosFetch.cmake")

# SOURCE's patched copy in <build>/_deps/NAME-src (NAME: kokkos or kokkos-kernels).
function(fused_linear_kokkos_source name source sha256 out_dir)
  string(TOUPPER "${name}" upper)
  string(REPLACE "-" "_" upper "${upper}")
  fused_linear_kokkos_fetch(${name} "${source}" "${sha256}" "${CMAKE_BINARY_DIR}/_deps/${name}-src"
                            dir SUM_OPTION "-DFusedLinear_${upper}_SHA256=<sum>")
  set(${out_dir} "${dir}" PARENT_SCOPE)
endfunction()

if(FUSED_LINEAR_KOKKOS_STAGE STREQUAL "compiler")
  # CUDA through the internal Kokkos: its nvcc_wrapper compiles everything, and the compiler is
  # chosen by project(), so the source is unpacked (and patched: CUDA 13 needs it) first. Not when
  # the packages stage will find an installed Kokkos (AUTO; an offline build must not download):
  # find_package cannot run before project(), so its config file is looked for in the places
  # find_package searches first (Kokkos_DIR, Kokkos_ROOT, CMAKE_PREFIX_PATH, /usr/local, /usr).
  set(_fused_linear_installed_kokkos)
  if(FusedLinear_INTERNAL_KOKKOS STREQUAL "AUTO" AND Kokkos_ENABLE_CUDA)
    file(TO_CMAKE_PATH "$ENV{CMAKE_PREFIX_PATH}" _fused_linear_env_prefixes)
    set(_fused_linear_dirs ${Kokkos_DIR} $ENV{Kokkos_DIR})
    foreach(_fused_linear_prefix ${Kokkos_ROOT} $ENV{Kokkos_ROOT} ${CMAKE_PREFIX_PATH}
            ${_fused_linear_env_prefixes} /usr/local /usr)
      file(GLOB _fused_linear_found "${_fused_linear_prefix}/lib*/cmake/Kokkos"
           "${_fused_linear_prefix}/lib/*/cmake/Kokkos" "${_fused_linear_prefix}/share/cmake/Kokkos")
      list(APPEND _fused_linear_dirs ${_fused_linear_found})
    endforeach()
    foreach(_fused_linear_dir IN LISTS _fused_linear_dirs)
      if(EXISTS "${_fused_linear_dir}/KokkosConfig.cmake")
        set(_fused_linear_installed_kokkos "${_fused_linear_dir}")
        break()
      endif()
    endforeach()
  endif()
  # CXX naming a compiler that cannot compile Kokkos' CUDA (a module system's or a conda
  # environment's g++) becomes nvcc_wrapper's host compiler, through a script that sets it for
  # every compile and link; nvcc_wrapper or clang in CXX is taken as it is.
  set(_fused_linear_host_cxx)
  if(DEFINED ENV{CXX})
    separate_arguments(_fused_linear_host_cxx UNIX_COMMAND "$ENV{CXX}")
    list(GET _fused_linear_host_cxx 0 _fused_linear_host_cxx)
    get_filename_component(_fused_linear_cxx_name "${_fused_linear_host_cxx}" NAME)
    if(_fused_linear_cxx_name MATCHES "^(nvcc_wrapper|clang\\+\\+.*)$")
      set(_fused_linear_host_cxx)
    endif()
  endif()
  if(Kokkos_ENABLE_CUDA AND NOT CMAKE_CXX_COMPILER
     AND (NOT DEFINED ENV{CXX} OR _fused_linear_host_cxx)
     AND NOT FusedLinear_INTERNAL_KOKKOS STREQUAL "OFF" AND NOT TARGET Kokkos::kokkos
     AND NOT _fused_linear_installed_kokkos)
    fused_linear_kokkos_source(kokkos "${FusedLinear_KOKKOS_SOURCE}" "${FusedLinear_KOKKOS_SHA256}"
                               _fused_linear_kokkos_src)
    set(_fused_linear_wrapper "${_fused_linear_kokkos_src}/bin/nvcc_wrapper")
    if(_fused_linear_host_cxx)
      set(_fused_linear_script "${CMAKE_BINARY_DIR}/_deps/host-cxx.tmp/nvcc_wrapper")
      file(WRITE "${_fused_linear_script}"
           "#!/bin/sh\n# nvcc_wrapper with CXX at configure time as the host compiler\n"
           "NVCC_WRAPPER_DEFAULT_COMPILER='${_fused_linear_host_cxx}' exec '${_fused_linear_wrapper}' \"$@\"\n")
      file(COPY "${_fused_linear_script}" DESTINATION "${CMAKE_BINARY_DIR}/_deps/host-cxx"
           FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                            WORLD_READ WORLD_EXECUTE)
      set(_fused_linear_wrapper "${CMAKE_BINARY_DIR}/_deps/host-cxx/nvcc_wrapper")
      message(STATUS "FusedLinear: CXX (${_fused_linear_host_cxx}) is nvcc_wrapper's host compiler")
    endif()
    set(CMAKE_CXX_COMPILER "${_fused_linear_wrapper}" CACHE FILEPATH
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
  # Kokkos' CUDA backend compiles with nvcc_wrapper or clang only; another compiler fails deep in
  # Kokkos' configure. Without CMAKE_CXX_COMPILER the internal nvcc_wrapper is taken (above).
  get_filename_component(_fused_linear_cxx_name "${CMAKE_CXX_COMPILER}" NAME)
  if(Kokkos_ENABLE_CUDA AND NOT _fused_linear_cxx_name STREQUAL "nvcc_wrapper"
     AND NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR
      "FusedLinear: the internal Kokkos with Kokkos_ENABLE_CUDA needs nvcc_wrapper or clang as "
      "the C++ compiler, not ${CMAKE_CXX_COMPILER}: leave CMAKE_CXX_COMPILER unset in a fresh "
      "build folder (the internal Kokkos' nvcc_wrapper is then taken, with CXX, if set, as its "
      "host compiler), or give -DCMAKE_CXX_COMPILER=<a Kokkos>/bin/nvcc_wrapper or clang++")
  endif()
  fused_linear_kokkos_source(kokkos "${FusedLinear_KOKKOS_SOURCE}" "${FusedLinear_KOKKOS_SHA256}"
                             _fused_linear_kokkos_src)
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
  fused_linear_kokkos_source(kokkos-kernels "${FusedLinear_KOKKOS_KERNELS_SOURCE}"
                             "${FusedLinear_KOKKOS_KERNELS_SHA256}" _fused_linear_kernels_src)
  message(STATUS "FusedLinear: building Kokkos Kernels from ${FusedLinear_KOKKOS_KERNELS_SOURCE}")
  add_subdirectory("${_fused_linear_kernels_src}" "${CMAKE_BINARY_DIR}/_deps/kokkos-kernels-build")
  get_directory_property(KokkosKernels_VERSION DIRECTORY "${_fused_linear_kernels_src}"
                         DEFINITION KokkosKernels_VERSION)
endif()
