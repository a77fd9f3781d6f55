# Unit tests for the Fashion-MNIST example's pure parts (library tymlp, defined in
# examples/fashion_mnist.cmake, which needs OpenBLAS).
if(OPENBLAS_FOUND)
  ty_add_unit_tests(test_mlp SOURCES test_mlp.c LIBS tymlp)
endif()
