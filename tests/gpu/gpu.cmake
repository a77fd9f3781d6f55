# Tests that need a real NVIDIA GPU (label `gpu`, docs/gpu.md). Each runs through gpu_gate.py,
# which exits 77 ("Not Run") naming the missing GPU where NVML finds none, so the normal suite
# passes on machines without one. scripts/gpu-run.sh runs them on a lent GPU machine.
# The python3 with PyTorch (CUDA) comes first on PATH on a GPU machine; -DTY_GPU_PYTHON= picks another.
find_program(TY_GPU_PYTHON NAMES python3)
set(gpu_gate ${CMAKE_CURRENT_LIST_DIR}/gpu_gate.py)
set(gpu_env "TY_BUILD_DIR=${CMAKE_BINARY_DIR};TY_SOURCE_DIR=${CMAKE_SOURCE_DIR};PYTHONDONTWRITEBYTECODE=1")
foreach(t agent torch_nccl)
  add_test(NAME gpu.${t}
           COMMAND ${TY_GPU_PYTHON} ${gpu_gate} ${TY_GPU_PYTHON} -m pytest -q -p no:cacheprovider
                   ${CMAKE_CURRENT_LIST_DIR}/test_gpu_${t}.py
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}/tests/integration)
  set_tests_properties(gpu.${t} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 900
                       ENVIRONMENT "${gpu_env}")
endforeach()
