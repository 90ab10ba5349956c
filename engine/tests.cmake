# The engine's own tests: engine/<room>/tests/*_test.cpp, one GoogleTest program per room
# (engine_<room>_test), labelled `engine`. They need no LibTorch, so they build and run with
# TB_WITH_TORCH=OFF, and ci/test runs them first (`ctest -L engine`). Expected numbers are
# written by hand in the tests, never produced by the engine itself.
# Included at the end of engine/CMakeLists.txt; GTest is found at the top level.
include(GoogleTest)

# Each room's test links only that room's library (tb_<room>, which brings the rooms to its left),
# so a test that needs a room to its right does not link: the layering holds for tests too.
set(TB_ENGINE_TEST_LIBS)
foreach(room IN LISTS TB_ROOMS)
  list(APPEND TB_ENGINE_TEST_LIBS ${room}=tb_${room})
endforeach()

# `cmake --build <dir> --target engine_tests` builds every room's test program (and the engine).
add_custom_target(engine_tests)
foreach(entry IN LISTS TB_ENGINE_TEST_LIBS)
  string(REPLACE "=" ";" pair "${entry}")
  list(GET pair 0 room)
  list(GET pair 1 lib)
  file(GLOB room_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/${room}/tests/*_test.cpp)
  if(NOT room_tests)
    continue()
  endif()
  add_executable(engine_${room}_test ${room_tests})
  target_link_libraries(engine_${room}_test PRIVATE ${lib} GTest::gtest_main)
  add_dependencies(engine_tests engine_${room}_test)
  # DISCOVERY_TIMEOUT: listing the tests runs the program; on a loaded 2-core machine the default
  # 5 s is not always enough for a freshly linked binary.
  gtest_discover_tests(engine_${room}_test TEST_PREFIX "engine.${room}." PROPERTIES LABELS engine
                       DISCOVERY_TIMEOUT 60)
endforeach()
