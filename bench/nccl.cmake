# nccl_bench: ty_allreduce on CUDA device buffers through the SDK's NCCL backend, world size 1
# (scripts/gpu-run.sh runs it on a lent GPU machine; docs/gpu.md has the figures). Built where
# the NCCL backend is.
if(TY_WITH_NCCL)
  add_executable(nccl_bench ${CMAKE_CURRENT_SOURCE_DIR}/nccl_bench.c)
  target_include_directories(nccl_bench PRIVATE ${NCCL_INCLUDE_DIR} ${TY_CUDA_ROOT}/include)
  target_link_libraries(nccl_bench PRIVATE trainyard ${CUDART_LIBRARY})
  target_compile_options(nccl_bench PRIVATE -O2)
endif()
