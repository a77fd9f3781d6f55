# Sweeps' search spaces and trial schedulers (tune/, library tytune).
ty_add_unit_tests(test_tune SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_tune.c LIBS tytune)
