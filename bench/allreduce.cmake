# allreduce_bench: libtrainyard's native ring allreduce, forked ranks on 127.0.0.1.
# Run through bench/allreduce.sh, which also runs torch gloo and Open MPI for comparison.
if(TARGET trainyard)
  add_executable(allreduce_bench ${CMAKE_CURRENT_SOURCE_DIR}/allreduce_bench.c)
  target_link_libraries(allreduce_bench PRIVATE trainyard)
  target_compile_options(allreduce_bench PRIVATE -O2)
endif()
