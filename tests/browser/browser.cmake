# The browser.* CTest entries (label `browser`): tests/browser/test_dashboard.py drives Debian's
# Chromium (headless, through playwright-core from web/node_modules) against a real server,
# PostgreSQL, agent and jobs. Without the built dashboard (node >= 18 and npm missing at
# configure time) or without Chromium every entry is still registered and reports "Not Run"
# (skip code 77), like fuzz.* without clang. Screenshots: <build>/browser-artifacts/.
find_program(PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(TY_CHROMIUM NAMES chromium chromium-browser)
set(browser_tests test_dashboard)
foreach(t ${browser_tests})
  if(TY_WEB_BUILT AND TY_CHROMIUM)
    add_test(NAME browser.${t}
             COMMAND sh -c "[ -f '${TY_WEB_OUT}/index.html' ] || { echo 'browser tests skipped: the dashboard was not built (npm ci failed: see the build log)'; exit 77; }; exec '${PYTHON3}' -m pytest -q -p no:cacheprovider '${CMAKE_CURRENT_SOURCE_DIR}/browser/${t}.py'"
             WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/browser)
    set_tests_properties(browser.${t} PROPERTIES LABELS browser TIMEOUT 300 SKIP_RETURN_CODE 77
      ENVIRONMENT "TY_BUILD_DIR=${CMAKE_BINARY_DIR};TY_SOURCE_DIR=${CMAKE_SOURCE_DIR};TY_NODE=${TY_NODE};TY_CHROMIUM=${TY_CHROMIUM};PYTHONDONTWRITEBYTECODE=1")
  else()
    add_test(NAME browser.${t}
             COMMAND sh -c "echo 'browser tests skipped: the dashboard was not built (node >= 18 and npm missing) or chromium was not found (scripts/install-deps.sh installs them)'; exit 77")
    set_tests_properties(browser.${t} PROPERTIES LABELS browser SKIP_RETURN_CODE 77)
  endif()
endforeach()
