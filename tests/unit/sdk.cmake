# libtrainyard tests: the report protocol codec (common/report_proto.c), sharding, context/env, report client (C and trainyard.py),
# native collectives (ranks as forked processes on 127.0.0.1).
if(TARGET trainyard)
  ty_add_unit_tests(test_sdk_wire SOURCES test_sdk_wire.c LIBS tyreport tyerrors)
  ty_add_unit_tests(test_sdk_shard SOURCES test_sdk_shard.c LIBS trainyard)
  ty_add_unit_tests(test_sdk_context SOURCES test_sdk_context.c LIBS trainyard)
  ty_add_unit_tests(test_sdk_report SOURCES test_sdk_report.c test_sdk_agent_stub.c
                    LIBS trainyard tyreport Threads::Threads)
  ty_add_unit_tests(test_sdk_python SOURCES test_sdk_python.c test_sdk_agent_stub.c
                    LIBS tyreport tyerrors Threads::Threads)
  target_compile_definitions(test_sdk_python PRIVATE
    TY_PYTHON_DIR="${CMAKE_SOURCE_DIR}/worker/python" TY_PYTHON3="/usr/bin/python3")
  ty_add_unit_tests(test_collectives SOURCES test_collectives.c test_collectives_world.c
                    LIBS trainyard)
  ty_add_unit_tests(test_collectives_faults SOURCES test_collectives_faults.c
                    test_collectives_world.c LIBS trainyard)
endif()
