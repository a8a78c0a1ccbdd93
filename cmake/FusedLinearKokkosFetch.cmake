# SPDX-License-Identifier: Apache-2.0
# The one place that fetches, checks and patches Kokkos and Kokkos Kernels sources: the configure
# (cmake/FusedLinearKokkos.cmake, internal Kokkos), scripts/setup.sh and CI all go through it.
#
# In a configure: include() it, then fused_linear_kokkos_fetch(...) (below). As a script:
#   cmake -DNAME=kokkos|kokkos-kernels -DSOURCE=<URL, .tar.gz or directory> -DDEST=<dir>
#         [-DSHA256=<sum>|UNCHECKED] [-DSUBDIR=packages/kokkos] [-DSUM_OPTION=<how to give a sum>]
#         [-DPATCH_DIR=<dir>] -P cmake/FusedLinearKokkosFetch.cmake
# leaves the patched source in DEST, and DEST/.fused-linear-info holds version=, patch= (the patch
# applied, if any) and source_id= (12 hex digits: the archive's SHA-256, or the directory's
# fingerprint) for a caller's cache keys.
#
# What is checked: an archive is built only when a SHA-256 for it is known, from the built-in sums
# below (by file name, a URL's ?query stripped) or given (SHA256); every sum that applies must
# agree, including a SHA256SUMS beside a local archive (which alone does not make an archive known:
# it comes from the same place as the archive). SHA256=UNCHECKED builds an unknown archive anyway.
# A directory is not checked; its copy is refreshed when its file list, sizes or times change.

cmake_policy(PUSH)
cmake_policy(VERSION 3.16)

# The upstream release archives and Debian's trilinos source (3.4.01 of both), by file name: a copy
# anywhere, or a mirror's URL, is checked too. A tag's archive (.../archive/refs/tags/4.6.01.tar.gz)
# is other bytes under another name, so it needs a sum of its own.
set(_fused_linear_sha256_kokkos-4.6.01.tar.gz
    b9d70e4653b87a06dbb48d63291bf248058c7c7db4bd91979676ad5609bb1a3a)
set(_fused_linear_sha256_kokkos-kernels-4.6.02.tar.gz
    a953f445660ed5aaab10e18fc4a90c4c178291e9d9d97d20abd4e6027f1193ec)
set(_fused_linear_sha256_trilinos_13.2.0.orig.tar.gz
    0ddb47784ba7b8a6b9a07a4822b33be508feb4ccd54301b2a5d10c9e54524b90)

if(NOT DEFINED FusedLinear_KOKKOS_PATCH_DIR)
  set(FusedLinear_KOKKOS_PATCH_DIR "${CMAKE_CURRENT_LIST_DIR}/patches")
endif()

# A patched copy of SOURCE (or of its SUBDIR: packages/kokkos of a Trilinos source) in DEST (the
# source itself is never written to), made again only when the source, its sums or the patch
# change. NAME is kokkos or kokkos-kernels. SUM_OPTION says how the user gives a sum (error text).
function(fused_linear_kokkos_fetch name source sha256 dest out_dir)
  cmake_parse_arguments(arg "" "SUBDIR;SUM_OPTION" "" ${ARGN})
  if(name STREQUAL "kokkos-kernels")
    set(prefix KokkosKernels)
  else()
    set(prefix Kokkos)
  endif()
  if(NOT arg_SUM_OPTION)
    set(arg_SUM_OPTION "SHA256=<sum>")
  endif()
  get_filename_component(deps "${dest}" DIRECTORY)
  set(is_url OFF)
  set(path "${source}")
  if(source MATCHES "^[A-Za-z][A-Za-z0-9+.-]*://")
    set(is_url ON)
    string(REGEX REPLACE "[?#].*$" "" path "${source}")  # .../x.tar.gz?download=1 is x.tar.gz
  elseif(NOT EXISTS "${source}")
    message(FATAL_ERROR "FusedLinear: ${source} does not exist (expected a URL, a .tar.gz or a directory)")
  endif()
  get_filename_component(file_name "${path}" NAME)
  set(sub "")
  if(arg_SUBDIR)
    set(sub "/${arg_SUBDIR}")
  endif()

  # What the copy in DEST is made from; when DEST says the same, it is kept.
  if(NOT is_url AND IS_DIRECTORY "${source}")
    _fused_linear_dir_fingerprint("${source}${sub}" fingerprint)
    set(id "directory ${source} ${arg_SUBDIR} ${fingerprint}")
    set(source_id "dir-${fingerprint}")
  else()
    set(sums)
    if(DEFINED _fused_linear_sha256_${file_name})
      list(APPEND sums "${_fused_linear_sha256_${file_name}}")
    endif()
    if(sha256 AND NOT sha256 STREQUAL "UNCHECKED")
      string(TOLOWER "${sha256}" sha256)
      list(APPEND sums "${sha256}")
    endif()
    if(NOT sums AND NOT sha256 STREQUAL "UNCHECKED")
      message(FATAL_ERROR
        "FusedLinear: no SHA-256 is known for ${file_name} (${source}): give the one its "
        "publisher lists with ${arg_SUM_OPTION}, or UNCHECKED there to build it unchecked")
    endif()
    list(REMOVE_DUPLICATES sums)
    set(id "archive ${source} ${arg_SUBDIR} ${sums}")
    if(NOT is_url)
      # A file replaced in place is checked again.
      file(SIZE "${source}" size)
      file(TIMESTAMP "${source}" mtime "%s" UTC)
      string(APPEND id " ${size} ${mtime}")
    endif()
  endif()
  _fused_linear_read_id("${dest}" old_id)
  if(old_id AND EXISTS "${dest}/CMakeLists.txt")
    fused_linear_kokkos_patch_for(${name} ${prefix} "${dest}" patch patch_id version)
    if(old_id STREQUAL "${id}\n${patch_id}")
      message(STATUS "FusedLinear: ${name} ${version} in ${dest} is up to date")
      set(${out_dir} "${dest}" PARENT_SCOPE)
      return()
    endif()
  endif()

  file(REMOVE_RECURSE "${dest}" "${dest}.tmp")
  file(MAKE_DIRECTORY "${dest}.tmp")
  if(is_url OR NOT IS_DIRECTORY "${source}")
    set(archive "${source}")
    if(is_url)
      set(archive "${deps}/${file_name}")
      message(STATUS "FusedLinear: downloading ${source}")
      # A stalled or endless transfer fails instead of hanging the configure; the sums are
      # checked below, as for a local archive.
      file(DOWNLOAD "${source}" "${archive}" STATUS status INACTIVITY_TIMEOUT 60 TIMEOUT 1800)
      list(GET status 0 rc)
      if(NOT rc EQUAL 0)
        list(GET status 1 why)
        file(REMOVE "${archive}")
        message(FATAL_ERROR "FusedLinear: cannot download ${source} (${why}). Without a network, "
                            "give the path of a copy of ${file_name} instead of the URL")
      endif()
    else()
      get_filename_component(sums_file "${source}/../SHA256SUMS" ABSOLUTE)
      if(EXISTS "${sums_file}")
        string(REGEX REPLACE "([][+.*?()^$|\\])" "\\\\\\1" name_regex "${file_name}")
        file(STRINGS "${sums_file}" lines REGEX "^[0-9a-fA-F]+ +\\*?${name_regex}$")
        if(lines)
          list(GET lines 0 line)
          string(REGEX REPLACE " .*" "" listed "${line}")
          string(TOLOWER "${listed}" listed)
          list(APPEND sums "${listed}")
          list(REMOVE_DUPLICATES sums)
        else()
          message(STATUS "FusedLinear: ${file_name} is not listed in ${sums_file}")
        endif()
      endif()
    endif()
    file(SHA256 "${archive}" actual)
    foreach(expected IN LISTS sums)
      if(NOT actual STREQUAL expected)
        file(REMOVE_RECURSE "${dest}.tmp")
        if(is_url)
          file(REMOVE "${archive}")
        endif()
        message(FATAL_ERROR "FusedLinear: ${archive} has SHA-256 ${actual}, expected ${expected} "
                            "(the built-in, given and SHA256SUMS sums must all agree)")
      endif()
    endforeach()
    if(sums)
      message(STATUS "FusedLinear: ${file_name}: SHA-256 checked")
    else()
      message(STATUS "FusedLinear: ${file_name}: not checked (SHA-256 UNCHECKED)")
    endif()
    string(SUBSTRING "${actual}" 0 12 source_id)
    set(members)
    if(arg_SUBDIR)
      set(members -- "*/${arg_SUBDIR}")  # only that folder of a Trilinos-sized archive
    endif()
    execute_process(COMMAND "${CMAKE_COMMAND}" -E tar xzf "${archive}" ${members}
                    WORKING_DIRECTORY "${dest}.tmp" RESULT_VARIABLE rc)
    file(GLOB tops LIST_DIRECTORIES true "${dest}.tmp/*")
    list(LENGTH tops n)
    if(NOT rc EQUAL 0 OR NOT n EQUAL 1)
      message(FATAL_ERROR "FusedLinear: ${archive} is not a .tar.gz with one top-level folder")
    endif()
    set(top "${tops}${sub}")
  else()
    message(STATUS "FusedLinear: copying ${source}${sub}")
    file(COPY "${source}${sub}/" DESTINATION "${dest}.tmp/copy" PATTERN ".git" EXCLUDE)
    set(top "${dest}.tmp/copy")
  endif()
  if(NOT EXISTS "${top}/CMakeLists.txt")
    message(FATAL_ERROR "FusedLinear: ${source}${sub} has no CMakeLists.txt")
  endif()
  fused_linear_kokkos_patch_for(${name} ${prefix} "${top}" patch patch_id version)
  if(patch)
    _fused_linear_apply_patch("${patch}" "${top}" "${source}")
  endif()
  file(RENAME "${top}" "${dest}")
  file(REMOVE_RECURSE "${dest}.tmp")
  file(WRITE "${dest}/.fused-linear-info" "version=${version}\npatch=${patch}\nsource_id=${source_id}\n")
  file(WRITE "${dest}/.fused-linear-id" "${id}\n${patch_id}")
  set(${out_dir} "${dest}" PARENT_SCOPE)
endfunction()

# PATCH applied to DIR, non-interactively (--batch: never a question, which pip would hide);
# a source that already carries it (a patched directory) is taken as it is. The check for that
# reverses with --force: under --batch, patch ignores -R where the patch is not yet applied.
function(_fused_linear_apply_patch patch dir source)
  find_program(FusedLinear_PATCH_PROGRAM patch)
  if(NOT FusedLinear_PATCH_PROGRAM)
    message(FATAL_ERROR "FusedLinear: ${patch} must be applied to ${source}, and there is no "
                        "`patch` program (Debian: apt-get install patch)")
  endif()
  get_filename_component(patch_name "${patch}" NAME)
  execute_process(COMMAND "${FusedLinear_PATCH_PROGRAM}" --dry-run --reverse --force --fuzz=0 -s -p1
                          -d "${dir}" -i "${patch}"
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0)
    message(STATUS "FusedLinear: ${patch_name} is already applied to ${source}")
    return()
  endif()
  execute_process(COMMAND "${FusedLinear_PATCH_PROGRAM}" --forward --batch -s -p1
                          -d "${dir}" -i "${patch}"
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "FusedLinear: ${patch} does not apply to ${source}")
  endif()
  message(STATUS "FusedLinear: applied ${patch_name}")
endfunction()

# A cheap fingerprint of a directory: its files' names, sizes and modification times (.git left out).
function(_fused_linear_dir_fingerprint dir out)
  file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${dir}" "${dir}/*")
  list(FILTER files EXCLUDE REGEX "(^|/)\\.git(/|$)")
  list(SORT files)
  set(text "")
  foreach(f IN LISTS files)
    if(EXISTS "${dir}/${f}")  # (a dangling link has neither)
      file(SIZE "${dir}/${f}" size)
      file(TIMESTAMP "${dir}/${f}" mtime "%s" UTC)
      string(APPEND text "${f} ${size} ${mtime}\n")
    endif()
  endforeach()
  string(SHA256 sum "${text}")
  string(SUBSTRING "${sum}" 0 12 sum)
  set(${out} "${sum}" PARENT_SCOPE)
endfunction()

function(_fused_linear_read_id dest out)
  set(${out} "" PARENT_SCOPE)
  if(EXISTS "${dest}/.fused-linear-id" AND EXISTS "${dest}/.fused-linear-info")
    file(READ "${dest}/.fused-linear-id" id)
    set(${out} "${id}" PARENT_SCOPE)
  endif()
endfunction()

# The patch FusedLinear_KOKKOS_PATCH_DIR/NAME-<version>-*.patch for the version DIR declares
# (X.Y.ZZ, as the release tags spell it), if any; PATCH_ID also names its contents, so that an
# edit re-applies it.
function(fused_linear_kokkos_patch_for name prefix dir out_patch out_id out_version)
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
  file(GLOB patches "${FusedLinear_KOKKOS_PATCH_DIR}/${name}-${version}-*.patch")
  list(LENGTH patches n)
  if(n GREATER 1)
    message(FATAL_ERROR "FusedLinear: more than one patch for ${name} ${version}: ${patches}")
  endif()
  set(${out_patch} "${patches}" PARENT_SCOPE)
  set(${out_version} "${version}" PARENT_SCOPE)
  if(patches)
    file(SHA256 "${patches}" sum)
    get_filename_component(patch_name "${patches}" NAME)
    set(${out_id} "${name} ${version}, ${patch_name} ${sum}" PARENT_SCOPE)
  else()
    set(${out_id} "${name} ${version}, no patch" PARENT_SCOPE)
  endif()
endfunction()

cmake_policy(POP)

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  foreach(required NAME SOURCE DEST)
    if(NOT DEFINED ${required})
      message(FATAL_ERROR "usage: cmake -DNAME=kokkos|kokkos-kernels -DSOURCE=... -DDEST=... "
                          "[-DSHA256=...] [-DSUBDIR=...] [-DSUM_OPTION=...] [-DPATCH_DIR=...] "
                          "-P ${CMAKE_CURRENT_LIST_FILE}")
    endif()
  endforeach()
  if(PATCH_DIR)
    set(FusedLinear_KOKKOS_PATCH_DIR "${PATCH_DIR}")
  endif()
  fused_linear_kokkos_fetch("${NAME}" "${SOURCE}" "${SHA256}" "${DEST}" _dir
                            SUBDIR "${SUBDIR}" SUM_OPTION "${SUM_OPTION}")
endif()
