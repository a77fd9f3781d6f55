# trainyard-agent pure modules (worker/agent: config, parsers, backoff, environment; the agent
# protocol of common/agent_proto.c, agent_proto_parse.c), linked through `agentcore` and tycommon.
foreach(t test_agent_env test_agent_proto test_agent_proto_report test_agent_proto_spool
         test_agent_config test_agent_logcut)
  ty_add_unit_tests(${t}
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/${t}.c
    LIBS agentcore tycommon PkgConfig::JANSSON)
endforeach()

# The validating JSON scanner of the report message (common/json_scan.c, in tycommon).
ty_add_unit_tests(test_json_scan
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_json_scan.c
  LIBS tycommon)

# Heartbeats: the report protocol's `progress` frame and the agent protocol's `progress` message
# (both in tycommon).
ty_add_unit_tests(test_agent_proto_progress
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_agent_proto_progress.c
  LIBS tycommon PkgConfig::JANSSON)
# The agent protocol's `usage` message (tycommon).
ty_add_unit_tests(test_agent_proto_usage
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_agent_proto_usage.c LIBS tycommon PkgConfig::JANSSON)
# The agent protocol's `gpus` message (tycommon).
ty_add_unit_tests(test_agent_proto_gpus
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_agent_proto_gpus.c LIBS tycommon PkgConfig::JANSSON)
