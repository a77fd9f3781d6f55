# Job status names of common/ (library tycommon): round trips, refusals, the terminal predicate.
ty_add_unit_tests(test_job_status SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_job_status.c
                  LIBS tycommon)
