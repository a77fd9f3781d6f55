# Metric downsampling (server/store/downsample.c): a pure module, compiled into the test directly so the
# test needs nothing else of the server.
ty_add_unit_tests(test_downsample
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_downsample.c ${CMAKE_SOURCE_DIR}/server/store/downsample.c
  LIBS m)
target_include_directories(test_downsample PRIVATE ${CMAKE_SOURCE_DIR}/server ${CMAKE_SOURCE_DIR}/server/control
  ${CMAKE_SOURCE_DIR}/server/store)
