# sched_bench: one scheduling pass at 10,000 nodes (docs/bench-scheduler.md). Not a CTest test.
add_executable(sched_bench ${CMAKE_CURRENT_SOURCE_DIR}/sched_bench.c)
target_link_libraries(sched_bench PRIVATE tysched)
target_compile_options(sched_bench PRIVATE -O2)
