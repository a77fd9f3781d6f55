# One CTest entry per pytest test file, collected at configure time by tests/pytest_ctest.py:
#
#   ty_add_pytest_tests(PREFIX integration DIR <dir> PYTHON <python3> FILES <test_*.py>...
#                       LABELS <label>... TIMEOUT <s> [ENVIRONMENT <VAR=value>...]
#                       [FIXTURES <fixture>...] [LAUNCHER <command>...] [NOT_RUN <why>]
#                       [STRIP <file name prefix>] [COLLECT_PYTHON <python3>...])
#
# Each file of FILES becomes PREFIX.<file> (<file> less STRIP), run in DIR as `LAUNCHER PYTHON
# pytest_ctest.py run <file>`, its COST the number of its tests (the biggest start first); a test
# marked `alone` becomes PREFIX.<file>.<test>, RUN_SERIAL. An entry reports Not Run (exit 77,
# SKIP_RETURN_CODE) when pytest skipped one of its tests. TIMEOUT is per entry. NOT_RUN registers
# every entry as Not Run, printing why (a tool the tests need is missing). COLLECT_PYTHON: the
# interpreters to collect with, the first that can (default PYTHON). The collection is done
# again when a .py file in DIR changes (the callers glob FILES with CONFIGURE_DEPENDS, so a new
# test file counts too).
set(TY_PYTEST_CTEST ${CMAKE_CURRENT_LIST_DIR}/pytest_ctest.py)

function(ty__pytest_case name file node count)
  if(node STREQUAL "")
    set(select ${file})
  else()
    set(select --ctest-node=${node} ${file})
  endif()
  if(DEFINED arg_NOT_RUN)
    add_test(NAME ${name} COMMAND sh -c "echo \"$0\"; exit 77" "${arg_NOT_RUN}")
  else()
    add_test(NAME ${name}
             COMMAND ${arg_LAUNCHER} ${arg_PYTHON} ${TY_PYTEST_CTEST} run -q ${select}
             WORKING_DIRECTORY ${arg_DIR})
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${arg_LABELS}" TIMEOUT ${arg_TIMEOUT}
                       SKIP_RETURN_CODE 77 ENVIRONMENT "${arg_ENVIRONMENT}" COST ${count})
  if(ARGN STREQUAL "ALONE")
    set_tests_properties(${name} PROPERTIES RUN_SERIAL TRUE)
  endif()
  if(arg_FIXTURES)
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED "${arg_FIXTURES}")
  endif()
endfunction()

function(ty_add_pytest_tests)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "PREFIX;DIR;PYTHON;TIMEOUT;NOT_RUN;STRIP"
                        "FILES;LABELS;ENVIRONMENT;FIXTURES;LAUNCHER;COLLECT_PYTHON")
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${arg_PREFIX}-pytest-tests.cmake)
  if(NOT arg_COLLECT_PYTHON)
    set(arg_COLLECT_PYTHON ${arg_PYTHON})
  endif()
  file(GLOB sources ${arg_DIR}/*.py)
  list(APPEND sources ${TY_PYTEST_CTEST})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${sources})
  set(key "${arg_COLLECT_PYTHON};${arg_STRIP};${arg_FILES}")
  foreach(f ${sources})
    file(SHA256 ${f} h)
    string(APPEND key ";${h}")
  endforeach()
  string(SHA256 key "${key}")
  if(NOT EXISTS ${out} OR NOT key STREQUAL "${TY__PYTEST_KEY_${arg_PREFIX}}")
    foreach(py ${arg_COLLECT_PYTHON})
      execute_process(COMMAND ${py} ${TY_PYTEST_CTEST} collect ${out} ${arg_PREFIX}
                              "${arg_STRIP}" ${arg_FILES}
                      WORKING_DIRECTORY ${arg_DIR} RESULT_VARIABLE rc ERROR_VARIABLE err)
      if(rc EQUAL 0)
        break()
      endif()
    endforeach()
    if(NOT rc EQUAL 0)
      # No pytest here: one entry per file, which fails when run (as the tests would).
      message(WARNING "${arg_PREFIX}: could not collect the pytest tests (${rc}): ${err}")
      file(REMOVE ${out})
      foreach(f ${arg_FILES})
        get_filename_component(stem ${f} NAME_WE)
        if(arg_STRIP)
          string(REGEX REPLACE "^${arg_STRIP}" "" stem ${stem})
        endif()
        ty__pytest_case(${arg_PREFIX}.${stem} ${f} "" 1)
      endforeach()
      return()
    endif()
    set(TY__PYTEST_KEY_${arg_PREFIX} ${key} CACHE INTERNAL "")
  endif()
  include(${out})
endfunction()
