# The store's named, typed column readers (server/store/db_col.c), on results built in memory:
# libpq is linked, no server is needed.
ty_add_unit_tests(test_db_col
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_db_col.c ${CMAKE_SOURCE_DIR}/server/store/db_col.c
  LIBS tycommon PkgConfig::PQ)
target_include_directories(test_db_col PRIVATE ${CMAKE_SOURCE_DIR}/server/store)
