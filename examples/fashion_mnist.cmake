# Fashion-MNIST data-parallel MLP example (examples/fashion_mnist/, see its README.md).
#
#   tymlp          static library of the pure parts: IDX reader, MLP + SGD, checkpoint file,
#                  config table, data batches (unit-tested by tests/unit/test_mlp.c)
#   fashion_mnist  the trainer, linked with the SDK (target `trainyard`) when that exists,
#                  built as ${CMAKE_BINARY_DIR}/examples/fashion_mnist/fashion_mnist
if(NOT OPENBLAS_FOUND)
  message(STATUS "fashion_mnist: OpenBLAS (libopenblas-dev) not found; example skipped")
  return()
endif()
pkg_check_modules(ZLIB REQUIRED IMPORTED_TARGET zlib)

set(FM_DIR ${CMAKE_CURRENT_LIST_DIR}/fashion_mnist)
add_library(tymlp STATIC
  ${FM_DIR}/checkpoint.c
  ${FM_DIR}/config.c
  ${FM_DIR}/data.c
  ${FM_DIR}/idx.c
  ${FM_DIR}/mlp.c
  ${FM_DIR}/rng.c)
target_include_directories(tymlp PUBLIC ${FM_DIR})
# The per-element loops next to the GEMMs (SGD update, bias, ReLU, batch gather) run every step:
# let the compiler vectorize them fully, as worker/sdk does for its reduction kernels.
set_source_files_properties(${FM_DIR}/mlp.c ${FM_DIR}/data.c PROPERTIES COMPILE_OPTIONS "-O3")
target_link_libraries(tymlp PUBLIC PkgConfig::OPENBLAS PkgConfig::JANSSON PkgConfig::ZLIB m)

if(NOT TARGET trainyard)
  message(STATUS "fashion_mnist: SDK target 'trainyard' not defined yet; building tymlp only")
  return()
endif()

add_executable(fashion_mnist ${FM_DIR}/train.c)
target_link_libraries(fashion_mnist PRIVATE tymlp trainyard)
set_target_properties(fashion_mnist PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/examples/fashion_mnist)

# CI runs on the real data (Debian's dataset-fashion-mnist, installed by scripts/install-deps.sh),
# standalone and with two workers started by hand: 2 epochs at the default settings reach
# 0.862-0.869 test accuracy, so the bar is 0.85.
set(FM_DATA /usr/share/datasets/fashion-mnist)
set(FM_CI_CFG ${CMAKE_CURRENT_BINARY_DIR}/fashion_mnist_ci.json)
file(WRITE ${FM_CI_CFG}
  "{\"epochs\": 2, \"min_accuracy\": 0.85, \"checkpoint_every\": 0,\n"
  " \"data_dir\": \"${FM_DATA}\"}\n")
add_test(NAME example.fashion_mnist_standalone
         COMMAND fashion_mnist --config ${FM_CI_CFG})
add_test(NAME example.fashion_mnist_2workers
         COMMAND ${FM_DIR}/run_local.sh 2 $<TARGET_FILE:fashion_mnist> ${FM_CI_CFG})
set_tests_properties(example.fashion_mnist_standalone example.fashion_mnist_2workers
                     PROPERTIES LABELS example TIMEOUT 300)
