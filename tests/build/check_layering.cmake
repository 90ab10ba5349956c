# ctest build.layering.<room> (cmake -P): compiles one line, `#include "<HEADER>"`, with the
# include directories of the room's target (tb_<ROOM>), and checks that it builds only when it
# should: ALLOWED (a header of the room or a room to its left) must compile, FORBIDDEN (a header
# of a room to its right, or of harness/ or suites/) must fail, and fail because it is not found,
# so the test cannot pass on a broken compiler line. Needs: CXX, ROOM, WORK_DIR and the
# '|'-separated lists INCLUDES, ALLOWED and FORBIDDEN (headers).
foreach(var CXX INCLUDES ROOM ALLOWED FORBIDDEN WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_layering.cmake: -D${var}=... is required")
  endif()
endforeach()
string(REPLACE "|" ";" includes "${INCLUDES}")
string(REPLACE "|" ";" allowed "${ALLOWED}")
string(REPLACE "|" ";" forbidden "${FORBIDDEN}")
set(include_flags)
foreach(dir IN LISTS includes)
  if(NOT dir STREQUAL "")
    list(APPEND include_flags -I${dir})
  endif()
endforeach()
file(MAKE_DIRECTORY ${WORK_DIR})

# Returns in `rc` and `err` the result of compiling a file that includes `header`.
function(compile header)
  string(MAKE_C_IDENTIFIER "${header}" name)
  set(src ${WORK_DIR}/${ROOM}_${name}.cpp)
  file(WRITE ${src} "#include \"${header}\"\nint main() { return 0; }\n")
  execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only ${include_flags} ${src}
                  RESULT_VARIABLE result ERROR_VARIABLE error OUTPUT_QUIET)
  set(rc ${result} PARENT_SCOPE)
  set(err "${error}" PARENT_SCOPE)
endfunction()

foreach(header IN LISTS allowed)
  compile(${header})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "room ${ROOM} must see ${header}, but it does not compile:\n${err}")
  endif()
  message(STATUS "room ${ROOM}: ${header} compiles (allowed)")
endforeach()
foreach(header IN LISTS forbidden)
  compile(${header})
  if(rc EQUAL 0)
    message(FATAL_ERROR "room ${ROOM} reaches ${header}, a room to its right: the layering is not enforced")
  endif()
  if(NOT err MATCHES "${header}: No such file or directory")
    message(FATAL_ERROR "room ${ROOM}: ${header} failed for another reason than not being found:\n${err}")
  endif()
  message(STATUS "room ${ROOM}: ${header} is not found (forbidden)")
endforeach()
