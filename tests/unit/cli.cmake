# The CLI's pure parts (library tycli_core): websocket framing and handshake text, the /stream
# protocol's messages, resume bookkeeping and backoff, and the lines the follow commands print.
ty_add_unit_tests(test_cli_ws SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_ws.c LIBS tycli_core)
ty_add_unit_tests(test_cli_stream SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_stream.c
                  LIBS tycli_core)
