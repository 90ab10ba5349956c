# `cmake --install <build> [--prefix P]`: the engine as a CMake package, so that another project
# can `find_package(trainbench)` and `target_link_libraries(app PRIVATE trainbench::engine)`
# (tests/build/outside_project does exactly that). Installed: every room's static library
# (trainbench::core ... trainbench::train), the umbrella trainbench::engine, the headers as
# include/engine/<room>/..., and lib/cmake/trainbench/ (config, version, targets).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TB_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/trainbench)
list(TRANSFORM TB_ROOMS PREPEND tb_ OUTPUT_VARIABLE tb_install_targets)
install(TARGETS ${tb_install_targets} tb_engine EXPORT trainbenchTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(room IN LISTS TB_ROOMS)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/engine/${room} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/engine
          FILES_MATCHING PATTERN "*.h" PATTERN tests EXCLUDE)
endforeach()
install(EXPORT trainbenchTargets NAMESPACE trainbench:: DESTINATION ${TB_INSTALL_CMAKEDIR})

# The config finds what the static libraries need at link time (their PRIVATE libraries reach
# users as $<LINK_ONLY:...>): the backends that this build has are named in it.
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/trainbenchConfig.cmake.in
  ${PROJECT_BINARY_DIR}/trainbenchConfig.cmake INSTALL_DESTINATION ${TB_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/trainbenchConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/trainbenchConfig.cmake ${PROJECT_BINARY_DIR}/trainbenchConfigVersion.cmake
        DESTINATION ${TB_INSTALL_CMAKEDIR})
