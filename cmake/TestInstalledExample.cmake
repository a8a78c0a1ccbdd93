# Run by CTest: installs FusedLinear from BINARY_DIR into WORK_DIR/install, configures and builds
# examples/ as a separate project that finds the package with find_package(FusedLinear), runs it.
foreach(var SOURCE_DIR BINARY_DIR WORK_DIR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "TestInstalledExample.cmake: ${var} is not set")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
string(REPLACE "|" ";" PREFIX_PATH "${PREFIX_PATH}")
set(prefix_path "${WORK_DIR}/install;${PREFIX_PATH}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()

run(${CMAKE_COMMAND} --install "${BINARY_DIR}" --prefix "${WORK_DIR}/install" --config ${CONFIG})
# The configured header is what tells the installed headers what this build enabled.
if(NOT INCLUDEDIR)
  set(INCLUDEDIR include)
endif()
set(config_hpp "${WORK_DIR}/install/${INCLUDEDIR}/FusedLinear/Config.hpp")
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${config_hpp}"
                        "${BINARY_DIR}/src/FusedLinear/Config.hpp" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${config_hpp} is missing or differs from the build's Config.hpp")
endif()
# Not through run(): its ARGN would split the prefix list into separate arguments.
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}/examples" -B "${WORK_DIR}/build" -G Ninja
                -DCMAKE_BUILD_TYPE=${CONFIG} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
                "-DCMAKE_PREFIX_PATH=${prefix_path}"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "failed (${rc}): configuring the example against ${WORK_DIR}/install")
endif()
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/linear_leaky_relu_example" 100 300 200)
