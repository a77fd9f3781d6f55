# Python unit tests (pytest) of the pure parts of worker/python (trainyard.train: packing,
# spec building, quality gates). One CTest entry per test (tests/pytest.cmake):
# unit.python.<file>.<test>. test_vocab.py checks the package's vocabulary (trainyard.train._vocab)
# against the C one (common/vocab.h, as vocab-dump writes it into <build>/vocab/vocab.json).
# Not in the sanitizer build: they run no compiled code of it (vocab.json is the same text in
# both builds), so its pass would repeat the normal build's.
if(TY_SANITIZE)
  return()
endif()
find_program(PYTHON3_UNIT NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
file(GLOB python_unit_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/python/test_*.py)
ty_add_pytest_tests(PREFIX unit.python DIR ${CMAKE_CURRENT_LIST_DIR}/python PYTHON ${PYTHON3_UNIT}
                    FILES ${python_unit_tests} LABELS unit TIMEOUT 120
                    ENVIRONMENT "PYTHONPYCACHEPREFIX=${CMAKE_BINARY_DIR}/pycache"
                    "PYTHONDONTWRITEBYTECODE=" "TY_VOCAB_JSON=${TY_VOCAB_JSON}")
