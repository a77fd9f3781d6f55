# Launch orders from typed store rows (server/control/launch.c): a pure module compiled into the test with
# the shared agent protocol (tycommon), so that the test needs nothing else of the server.
ty_add_unit_tests(test_agent_launch
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_agent_launch.c ${CMAKE_SOURCE_DIR}/server/control/launch.c
  LIBS tycommon PkgConfig::JANSSON)
target_include_directories(test_agent_launch PRIVATE ${CMAKE_SOURCE_DIR}/server ${CMAKE_SOURCE_DIR}/server/control
  ${CMAKE_SOURCE_DIR}/server/store)
