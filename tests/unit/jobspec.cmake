# Job-spec validation and typed view (common/jobspec.c, jobspec_config.c, jobspec_view.c). The
# module is compiled into the test directly (it has no other dependency than jansson).
ty_add_unit_tests(test_jobspec
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_jobspec.c ${CMAKE_SOURCE_DIR}/common/jobspec.c
          ${CMAKE_SOURCE_DIR}/common/jobspec_config.c ${CMAKE_SOURCE_DIR}/common/jobspec_view.c
  LIBS PkgConfig::JANSSON m)
target_include_directories(test_jobspec PRIVATE ${CMAKE_SOURCE_DIR}/common)
