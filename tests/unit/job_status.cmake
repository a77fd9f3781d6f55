# Job, worker and node status names of common/ (library tycommon): round trips, refusals, the
# terminal and live predicates.
ty_add_unit_tests(test_job_status SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_job_status.c
                  LIBS tycommon)
