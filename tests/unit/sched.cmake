# Scheduler unit tests (scheduler/, library tysched): one target per theme, sharing a fixture.
foreach(t sched sched_backfill sched_reason sched_input sched_props sched_gpu)
  ty_add_unit_tests(test_${t}
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_${t}.c ${CMAKE_CURRENT_SOURCE_DIR}/test_sched_fixture.c
    LIBS tysched)
endforeach()
