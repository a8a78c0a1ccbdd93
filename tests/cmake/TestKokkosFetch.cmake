# SPDX-License-Identifier: Apache-2.0
# One case (CASE) of the Kokkos fetch, on a fake Kokkos 9.9.01 made here (a CMakeLists.txt that
# declares the version, a file its fake patch changes) under WORK_DIR; FETCH is the module.
cmake_minimum_required(VERSION 3.16)

file(REMOVE_RECURSE "${WORK_DIR}")
set(src "${WORK_DIR}/src/fake-kokkos")
file(WRITE "${src}/CMakeLists.txt"
     "set(Kokkos_VERSION_MAJOR 9)\nset(Kokkos_VERSION_MINOR 9)\nset(Kokkos_VERSION_PATCH 1)\n")
file(WRITE "${src}/file.txt" "before\n")
file(WRITE "${WORK_DIR}/patches/kokkos-9.9.01-test.patch"
     "--- a/file.txt\n+++ b/file.txt\n@@ -1 +1 @@\n-before\n+after\n")
set(archive "${WORK_DIR}/archives/kokkos-9.9.01.tar.gz")  # a name no built-in sum knows
file(MAKE_DIRECTORY "${WORK_DIR}/archives")
execute_process(COMMAND "${CMAKE_COMMAND}" -E tar czf "${archive}" fake-kokkos
                WORKING_DIRECTORY "${WORK_DIR}/src" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cannot make ${archive}")
endif()
file(SHA256 "${archive}" archive_sum)
set(dest "${WORK_DIR}/deps/kokkos-src")

# Runs the module on SOURCE with the -D arguments that follow; RC and OUT (stdout + stderr) set.
function(fetch source)
  execute_process(COMMAND "${CMAKE_COMMAND}" -DNAME=kokkos "-DSOURCE=${source}" "-DDEST=${dest}"
                          "-DPATCH_DIR=${WORK_DIR}/patches" "-DSUM_OPTION=-DTEST_SHA256=<sum>"
                          ${ARGN} -P "${FETCH}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 30)
  message("fetch ${source} ${ARGN}: ${rc}\n${out}${err}")
  set(RC "${rc}" PARENT_SCOPE)
  string(REGEX REPLACE "[ \n]+" " " out "${out}${err}")  # (CMake wraps its error messages)
  set(OUT "${out}" PARENT_SCOPE)
endfunction()
function(expect_ok what)
  if(NOT RC EQUAL 0)
    message(FATAL_ERROR "${what}: failed")
  endif()
  file(READ "${dest}/file.txt" text)
  if(NOT text STREQUAL "after\n")
    message(FATAL_ERROR "${what}: the copy is not patched ('${text}')")
  endif()
endfunction()
function(expect_refused what regex)
  if(RC EQUAL 0)
    message(FATAL_ERROR "${what}: accepted")
  endif()
  if(NOT OUT MATCHES "${regex}")
    message(FATAL_ERROR "${what}: the message does not match '${regex}'")
  endif()
endfunction()
function(expect_output what regex)
  if(NOT OUT MATCHES "${regex}")
    message(FATAL_ERROR "${what}: the output does not match '${regex}'")
  endif()
endfunction()
# The built-in sum of kokkos-4.6.01.tar.gz (a fake under that name must be refused).
set(builtin_4601 b9d70e4653b87a06dbb48d63291bf248058c7c7db4bd91979676ad5609bb1a3a)

if(CASE STREQUAL "unknown_archive_refused")
  fetch("${archive}")
  expect_refused("no sum" "no SHA-256 is known for kokkos-9.9.01.tar.gz.*-DTEST_SHA256=<sum>")
  if(EXISTS "${dest}")
    message(FATAL_ERROR "refused, yet ${dest} was made")
  endif()
  fetch("${archive}" -DSHA256=UNCHECKED)  # the explicit opt-out
  expect_ok("UNCHECKED")
  expect_output("UNCHECKED" "not checked")

elseif(CASE STREQUAL "sum_given_accepted")
  fetch("${archive}" -DSHA256=${archive_sum})
  expect_ok("the right sum")
  expect_output("the right sum" "SHA-256 checked")
  file(STRINGS "${dest}/.fused-linear-info" info)
  string(SUBSTRING "${archive_sum}" 0 12 id)
  if(NOT info STREQUAL "version=9.9.01;patch=${WORK_DIR}/patches/kokkos-9.9.01-test.patch;source_id=${id}")
    message(FATAL_ERROR "unexpected .fused-linear-info: ${info}")
  endif()
  fetch("${archive}" -DSHA256=${builtin_4601})
  expect_refused("a wrong sum" "has SHA-256 ${archive_sum}, expected ${builtin_4601}")

elseif(CASE STREQUAL "sha256sums_cannot_override_builtin")
  # A fake under a release archive's name, listed in a SHA256SUMS beside it (and given as well):
  # the built-in sum still decides.
  file(MAKE_DIRECTORY "${WORK_DIR}/other")
  configure_file("${archive}" "${WORK_DIR}/other/kokkos-4.6.01.tar.gz" COPYONLY)
  file(WRITE "${WORK_DIR}/other/SHA256SUMS" "${archive_sum}  kokkos-4.6.01.tar.gz\n")
  fetch("${WORK_DIR}/other/kokkos-4.6.01.tar.gz")
  expect_refused("SHA256SUMS" "expected ${builtin_4601}")
  fetch("${WORK_DIR}/other/kokkos-4.6.01.tar.gz" -DSHA256=${archive_sum})
  expect_refused("SHA256SUMS and a given sum" "expected ${builtin_4601}")
  # Beside an unknown archive, a SHA256SUMS that disagrees with the given sum refuses it.
  file(WRITE "${WORK_DIR}/archives/SHA256SUMS" "${builtin_4601} *kokkos-9.9.01.tar.gz\n")
  fetch("${archive}" -DSHA256=${archive_sum})
  expect_refused("a SHA256SUMS that disagrees" "expected ${builtin_4601}")

elseif(CASE STREQUAL "query_stripped")
  fetch("file://${archive}?download=1")
  expect_refused("a URL with a query, no sum" "no SHA-256 is known for kokkos-9.9.01.tar.gz ")
  fetch("file://${archive}?download=1" -DSHA256=${archive_sum})
  expect_ok("a URL with a query and its sum")
  if(NOT EXISTS "${WORK_DIR}/deps/kokkos-9.9.01.tar.gz")
    message(FATAL_ERROR "the download is not named kokkos-9.9.01.tar.gz")
  endif()
  # A release archive's name behind a query: its built-in sum applies (the fake fails it).
  configure_file("${archive}" "${WORK_DIR}/archives/kokkos-4.6.01.tar.gz" COPYONLY)
  fetch("file://${WORK_DIR}/archives/kokkos-4.6.01.tar.gz?x=1#y")
  expect_refused("a release archive's name with a query" "expected ${builtin_4601}")

elseif(CASE STREQUAL "directory_recopied_on_change")
  fetch("${src}")
  expect_ok("a directory")
  expect_output("a directory" "copying")
  fetch("${src}")
  expect_ok("the same directory")
  expect_output("the same directory" "up to date")
  if(OUT MATCHES "copying")
    message(FATAL_ERROR "an unchanged directory was copied again")
  endif()
  file(WRITE "${src}/new.txt" "a file more\n")
  fetch("${src}")
  expect_ok("a changed directory")
  expect_output("a changed directory" "copying")
  if(NOT EXISTS "${dest}/new.txt")
    message(FATAL_ERROR "the copy misses the new file")
  endif()
  file(APPEND "${src}/new.txt" "a line more\n")  # same file list, another size
  fetch("${src}")
  file(READ "${dest}/new.txt" text)
  if(NOT text STREQUAL "a file more\na line more\n")
    message(FATAL_ERROR "a changed file was not copied again")
  endif()

elseif(CASE STREQUAL "patch_already_applied")
  file(WRITE "${src}/file.txt" "after\n")  # a source that carries the patch already
  fetch("${src}")
  expect_ok("an already patched directory")
  expect_output("an already patched directory" "already applied")
  file(WRITE "${src}/file.txt" "something else\n")  # one the patch does not fit: no question
  fetch("${src}")
  expect_refused("a directory the patch does not fit" "does not apply")

else()
  message(FATAL_ERROR "unknown CASE '${CASE}'")
endif()
