# The browser.* CTest entries (label `browser`), one per file of tests/browser (tests/pytest.cmake):
# Debian's Chromium (headless, through playwright-core from web/node_modules) against a real server, PostgreSQL, agent and jobs. Without the built
# dashboard (node >= 18 and npm missing at configure time, or npm ci failed) or without Chromium
# every entry is still registered and reports "Not Run" (skip code 77), like fuzz.* without
# clang. Screenshots: <build>/browser-artifacts/.
#
# Not in the sanitizer build (docs/decisions.md, "The suite inside CI's 30 minutes"): the
# browser, Node and the dashboard's JavaScript are the same in both builds, and every server
# endpoint the dashboard uses (REST, /stream, the static files) has integration tests that run
# in both. Chromium's CPU is the largest part of these tests' cost.
if(TY_SANITIZE)
  return()
endif()
find_program(PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(TY_CHROMIUM NAMES chromium chromium-browser)
file(GLOB browser_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_*.py)
if(TY_WEB_BUILT AND TY_CHROMIUM)
  set(browser_not_run "")
else()
  set(browser_not_run NOT_RUN "browser tests skipped: the dashboard was not built (node >= 18 and npm missing) or chromium was not found (scripts/install-deps.sh installs them)")
endif()
ty_add_pytest_tests(PREFIX browser DIR ${CMAKE_CURRENT_LIST_DIR} PYTHON ${PYTHON3}
  LAUNCHER sh -c "[ -f '${TY_WEB_OUT}/index.html' ] || { echo 'browser tests skipped: the dashboard was not built (npm ci failed: see the build log)'; exit 77; }; exec \"$@\"" sh
  FILES ${browser_tests} LABELS browser TIMEOUT 900 FIXTURES postgres ${browser_not_run}
  ENVIRONMENT ${TY_PYTEST_ENV} "TY_NODE=${TY_NODE}" "TY_CHROMIUM=${TY_CHROMIUM}")
