# The Fashion-MNIST MLP on a GPU (examples/fashion_mnist_cuda/, see its README.md): the CPU
# example's train.c built with FM_CUDA plus fm_device.cu (cuBLAS for the products, small kernels
# for the rest), compiled by nvcc when the CUDA toolkit is found. Its run needs a GPU: the test
# is labelled `gpu` and reports "Not Run" (77) without one (tests/gpu/gpu_gate.py).
if(NOT TARGET tymlp OR NOT TARGET trainyard OR TY_SANITIZE)
  message(STATUS "fashion_mnist_cuda: needs the CPU example and the SDK (no sanitizer build); skipped")
  return()
endif()
if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS ${TY_CUDA_ROOT}/bin/nvcc)
  set(CMAKE_CUDA_COMPILER ${TY_CUDA_ROOT}/bin/nvcc)
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(STATUS "fashion_mnist_cuda: no CUDA compiler (nvcc) under ${TY_CUDA_ROOT}; skipped")
  return()
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90) # H100/H200 code, with PTX that newer GPUs compile at load
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
message(STATUS "fashion_mnist_cuda: built with CUDA ${CUDAToolkit_VERSION} for sm_${CMAKE_CUDA_ARCHITECTURES}")

set(FMC_DIR ${CMAKE_CURRENT_LIST_DIR}/fashion_mnist_cuda)
add_executable(fashion_mnist_cuda ${FM_DIR}/train.c ${FMC_DIR}/fm_device.cu)
target_compile_definitions(fashion_mnist_cuda PRIVATE FM_CUDA)
target_compile_options(fashion_mnist_cuda PRIVATE
  "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Werror>") # -O: the build type's
target_include_directories(fashion_mnist_cuda PRIVATE ${FMC_DIR})
target_link_libraries(fashion_mnist_cuda PRIVATE tymlp trainyard CUDA::cudart CUDA::cublas)
set_target_properties(fashion_mnist_cuda PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/examples/fashion_mnist_cuda)

# Same bar and config as example.fashion_mnist_standalone, on the GPU.
add_test(NAME gpu.fashion_mnist_cuda
         COMMAND ${TY_GPU_PYTHON} ${PROJECT_SOURCE_DIR}/tests/gpu/gpu_gate.py
                 $<TARGET_FILE:fashion_mnist_cuda> --config ${FM_CI_CFG})
set_tests_properties(gpu.fashion_mnist_cuda PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
                     TIMEOUT 300 ENVIRONMENT "CUDA_VISIBLE_DEVICES=0")
