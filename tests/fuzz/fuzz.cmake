# The fuzz.* CTest entries (included by tests/CMakeLists.txt; docs/fuzzing.md). The normal build
# uses gcc and does not compile the libFuzzer targets: fuzz.build builds the clang project in
# tests/fuzz into <build>/fuzz, then each fuzz.<target> runs for TY_FUZZ_SECONDS from the seeds
# in tests/fuzz/corpus/<target> (new inputs go to <build>/fuzz/corpus-<target>, crashes to
# <build>/fuzz/crash-<target>-*). Without clang every entry is still registered and reports
# "Not Run" (skipped), so a suite without fuzzing says so rather than passing silently;
# -DTY_FUZZ=OFF skips them the same way.
set(TY_FUZZ_TARGETS fuzz_jobspec fuzz_agent_server_msg fuzz_agent_node_msg fuzz_wire fuzz_query
    fuzz_stream_req)
set(TY_FUZZ_SECONDS 10 CACHE STRING "seconds each fuzz.* CTest entry fuzzes")
option(TY_FUZZ "build and run the libFuzzer targets in the suite when clang is found" ON)
find_program(TY_CLANG NAMES clang)
set(fuzz_bin ${CMAKE_BINARY_DIR}/fuzz)

if(TY_SANITIZE)
  # The fuzz targets are clang AddressSanitizer + UBSan builds of their own whichever build
  # registers them: the sanitizer build would run the very programs the normal build's suite ran
  # (scripts/test.sh runs both), for two minutes of the two cores. The normal build runs them.
  message(STATUS "fuzz.* entries: in the normal build only (they are sanitizer builds already)")
elseif(TY_FUZZ AND TY_CLANG)
  add_test(NAME fuzz.build
           COMMAND sh -c "${CMAKE_COMMAND} -S '${CMAKE_CURRENT_SOURCE_DIR}/fuzz' -B '${fuzz_bin}' -DCMAKE_C_COMPILER='${TY_CLANG}' -DCMAKE_BUILD_TYPE= >/dev/null && ${CMAKE_COMMAND} --build '${fuzz_bin}' -j2")
  set_tests_properties(fuzz.build PROPERTIES LABELS fuzz FIXTURES_SETUP fuzz_built TIMEOUT 600)
  foreach(t ${TY_FUZZ_TARGETS})
    add_test(NAME fuzz.${t}
             COMMAND sh -c "mkdir -p '${fuzz_bin}/corpus-${t}' && exec '${fuzz_bin}/${t}' -max_total_time=${TY_FUZZ_SECONDS} -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix='${fuzz_bin}/crash-${t}-' '${fuzz_bin}/corpus-${t}' '${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${t}'")
    set_tests_properties(fuzz.${t} PROPERTIES LABELS fuzz FIXTURES_REQUIRED fuzz_built
                         TIMEOUT 300)
  endforeach()
else()
  foreach(t build ${TY_FUZZ_TARGETS})
    add_test(NAME fuzz.${t}
             COMMAND sh -c "echo 'fuzzing skipped: clang not found (scripts/install-deps.sh installs it) or -DTY_FUZZ=OFF'; exit 77")
    set_tests_properties(fuzz.${t} PROPERTIES LABELS fuzz SKIP_RETURN_CODE 77)
  endforeach()
endif()
