# Python unit tests (pytest) of the pure parts of worker/python (trainyard.train: packing,
# spec building, quality gates). One CTest entry for the file.
find_program(PYTHON3_UNIT NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
add_test(NAME unit.python_train_pure
         COMMAND ${PYTHON3_UNIT} -m pytest -q -p no:cacheprovider
                 ${CMAKE_CURRENT_SOURCE_DIR}/python/test_train_pure.py)
set_tests_properties(unit.python_train_pure PROPERTIES LABELS unit TIMEOUT 120
  ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")

# The Python package's vocabulary (trainyard.train._vocab) against the C one (common/vocab.h, as
# vocab-dump writes it into <build>/vocab/vocab.json at build time).
add_test(NAME unit.python_vocab
         COMMAND ${PYTHON3_UNIT} -m pytest -q -p no:cacheprovider
                 ${CMAKE_CURRENT_SOURCE_DIR}/python/test_vocab.py)
set_tests_properties(unit.python_vocab PROPERTIES LABELS unit TIMEOUT 120
  ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1;TY_VOCAB_JSON=${TY_VOCAB_JSON}")
