# The server's pure modules, each compiled into its test directly so the test needs nothing else
# of the server: token minting and role names (token.c, identity.c).
ty_add_unit_tests(test_token
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_token.c ${CMAKE_SOURCE_DIR}/server/token.c
          ${CMAKE_SOURCE_DIR}/server/identity.c
  LIBS tycommon)
target_include_directories(test_token PRIVATE ${CMAKE_SOURCE_DIR}/server)
