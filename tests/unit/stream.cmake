# The /stream protocol without I/O (server/stream/stream_proto.c): requests, messages and the
# cluster stream's ordering rule. Its header names the store's row type; nothing of libpq is
# linked or called.
ty_add_unit_tests(test_stream_proto
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_stream_proto.c
          ${CMAKE_SOURCE_DIR}/server/stream/stream_proto.c
  LIBS PkgConfig::JANSSON)
target_include_directories(test_stream_proto PRIVATE ${CMAKE_SOURCE_DIR}/server/stream
  ${CMAKE_SOURCE_DIR}/server/store)
