# trainyard-agent checkpoint directories (worker/agent/checkpoint.c, in `agentcore`): taking a
# rank's directory over and merging the local ranks' parts. Uses a temporary directory.
ty_add_unit_tests(test_agent_checkpoint
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_agent_checkpoint.c
  LIBS agentcore tycommon PkgConfig::JANSSON)

# The checkpoint part as a tar stream made on the fly (worker/agent/tarstream.c, in `agentcore`):
# GNU tar unpacks it, any offset reads the same bytes. Uses a temporary directory and tar(1).
ty_add_unit_tests(test_agent_tarstream
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_agent_tarstream.c
  LIBS agentcore tycommon PkgConfig::JANSSON)
