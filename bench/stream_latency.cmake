# stream_latency: report → /stream subscriber latency under load (docs/bench-streams.md), driven
# by bench/stream_latency.py. Not a CTest test.
add_executable(stream_latency ${CMAKE_CURRENT_SOURCE_DIR}/stream_latency.c)
target_link_libraries(stream_latency PRIVATE PkgConfig::PQ Threads::Threads)
target_compile_options(stream_latency PRIVATE -O2)
