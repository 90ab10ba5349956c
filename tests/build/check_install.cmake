# ctest build.install (cmake -P): installs the engine of BUILD_DIR into a fresh prefix, then
# configures, builds and runs tests/build/outside_project against it with find_package, the way a
# user of the installed tree would. Needs: BUILD_DIR, WORK_DIR, SOURCE_DIR, GENERATOR, CXX.
foreach(var BUILD_DIR WORK_DIR SOURCE_DIR GENERATOR CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_install.cmake: -D${var}=... is required")
  endif()
endforeach()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(installed include/engine/tensor/tensor.h include/engine/autograd/functions.h
                  lib/cmake/trainbench/trainbenchConfig.cmake)
  if(NOT EXISTS ${prefix}/${installed})
    message(FATAL_ERROR "the install tree lacks ${installed}")
  endif()
endforeach()
# No header outside engine/ is installed, and no engine/*/tests/ folder.
file(GLOB_RECURSE stray RELATIVE ${prefix}/include ${prefix}/include/*)
list(FILTER stray EXCLUDE REGEX "^engine/[a-z_]+/([a-z_]+/)?[a-z_0-9]+\\.h$")
if(stray)
  message(FATAL_ERROR "unexpected files under include/: ${stray}")
endif()

# Only the install prefix is searched: the build tree's own package registry must not help.
run("configuring the outside project" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/build/outside_project
    -B ${WORK_DIR}/build -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
run("building the outside project" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run("running the outside program" ${WORK_DIR}/build/outside)
message(STATUS "${last_output}")
