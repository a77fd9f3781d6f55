# Tests that need a real NVIDIA GPU (label `gpu`, docs/gpu.md), one CTest entry per pytest test
# (tests/pytest.cmake), named gpu.<file less test_gpu_>.<test>, e.g. gpu.agent.test_nvml_...
# Each runs through gpu_gate.py, which exits 77 ("Not Run") naming the missing GPU where NVML
# finds none, so the normal suite passes on machines without one. scripts/gpu-run.sh runs them
# on a lent GPU machine. The python3 with PyTorch (CUDA) comes first on PATH on a GPU machine;
# -DTY_GPU_PYTHON= picks another. They share the integration tests' PostgreSQL (the fixture).
find_program(TY_GPU_PYTHON NAMES python3)
set(gpu_gate ${CMAKE_CURRENT_LIST_DIR}/gpu_gate.py)
file(GLOB gpu_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_gpu_*.py)
ty_add_pytest_tests(PREFIX gpu STRIP test_gpu_ DIR ${CMAKE_CURRENT_LIST_DIR}
                    PYTHON ${TY_GPU_PYTHON} COLLECT_PYTHON ${TY_GPU_PYTHON} ${PYTHON3}
                    LAUNCHER ${TY_GPU_PYTHON} ${gpu_gate} FILES ${gpu_tests}
                    LABELS gpu TIMEOUT 900 FIXTURES postgres ENVIRONMENT ${TY_PYTEST_ENV})

# The SDK's collectives on device buffers through NCCL, one rank (nccl_world1.c); built where the
# NCCL backend is (CUDA headers and libcudart found), run where a GPU is.
if(TY_WITH_NCCL)
  add_executable(ty_nccl_world1 ${CMAKE_CURRENT_LIST_DIR}/nccl_world1.c)
  target_include_directories(ty_nccl_world1 PRIVATE ${NCCL_INCLUDE_DIR} ${TY_CUDA_ROOT}/include)
  target_link_libraries(ty_nccl_world1 PRIVATE trainyard ${CUDART_LIBRARY})
  set_target_properties(ty_nccl_world1 PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/progs)
  add_test(NAME gpu.nccl_world1 COMMAND ${TY_GPU_PYTHON} ${gpu_gate} $<TARGET_FILE:ty_nccl_world1>)
  set_tests_properties(gpu.nccl_world1 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300
                       ENVIRONMENT "CUDA_VISIBLE_DEVICES=0")
  # Communicator creation with a peer that never arrives: TY_ETIMEDOUT within the collective
  # timeout (nccl_init_timeout.c); a hang is caught by TIMEOUT.
  add_executable(ty_nccl_init_timeout ${CMAKE_CURRENT_LIST_DIR}/nccl_init_timeout.c
                 ${PROJECT_SOURCE_DIR}/tests/unit/test_collectives_world.c)
  target_include_directories(ty_nccl_init_timeout PRIVATE ${NCCL_INCLUDE_DIR} ${TY_CUDA_ROOT}/include
                             ${PROJECT_SOURCE_DIR}/tests/unit)
  target_link_libraries(ty_nccl_init_timeout PRIVATE trainyard ${CUDART_LIBRARY})
  set_target_properties(ty_nccl_init_timeout PROPERTIES
                        RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/progs)
  add_test(NAME gpu.nccl_init_timeout
           COMMAND ${TY_GPU_PYTHON} ${gpu_gate} $<TARGET_FILE:ty_nccl_init_timeout>)
  set_tests_properties(gpu.nccl_init_timeout PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 120
                       ENVIRONMENT "CUDA_VISIBLE_DEVICES=0")
endif()
