# Job-spec validation (common/jobspec.c). The module is compiled into the test directly, so the
# tests do not depend on how common/ packages its library.
ty_add_unit_tests(test_jobspec
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_jobspec.c ${CMAKE_SOURCE_DIR}/common/jobspec.c
  LIBS PkgConfig::JANSSON m)
target_include_directories(test_jobspec PRIVATE ${CMAKE_SOURCE_DIR}/common)
