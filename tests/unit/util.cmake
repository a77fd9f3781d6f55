# Shared helpers of common/ (library tycommon): durable file writes.
ty_add_unit_tests(test_util SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_util.c LIBS tycommon)
