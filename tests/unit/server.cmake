# The server's pure modules, each compiled into its test directly so the test needs nothing else
# of the server: the scheduler snapshot built from the store's rows (control_snapshot.c; its
# header names the store's row types, but nothing of libpq is linked or called), and token
# minting and role names (token.c, identity.c).
ty_add_unit_tests(test_control_snapshot
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_control_snapshot.c
          ${CMAKE_SOURCE_DIR}/server/control/control_snapshot.c
  LIBS tysched tycommon m)
target_include_directories(test_control_snapshot PRIVATE ${CMAKE_SOURCE_DIR}/server
  ${CMAKE_SOURCE_DIR}/server/control ${CMAKE_SOURCE_DIR}/server/store ${CMAKE_SOURCE_DIR})

ty_add_unit_tests(test_token
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_token.c ${CMAKE_SOURCE_DIR}/server/token.c
          ${CMAKE_SOURCE_DIR}/server/identity.c
  LIBS tycommon)
target_include_directories(test_token PRIVATE ${CMAKE_SOURCE_DIR}/server)

# The Prometheus text writer of GET /metrics (server/http/prom.c) and the histograms it reads
# (server/telemetry.c).
ty_add_unit_tests(test_prom
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_prom.c ${CMAKE_SOURCE_DIR}/server/http/prom.c
          ${CMAKE_SOURCE_DIR}/server/telemetry.c
  LIBS tycommon m)
target_include_directories(test_prom PRIVATE ${CMAKE_SOURCE_DIR}/server ${CMAKE_SOURCE_DIR}/server/http)

# The parsers of query-string values (server/http/query.c).
ty_add_unit_tests(test_query
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_query.c ${CMAKE_SOURCE_DIR}/server/http/query.c
  LIBS tycommon)
target_include_directories(test_query PRIVATE ${CMAKE_SOURCE_DIR}/server/http)
# The per-user quota of running workers (server/control/quota.c).
ty_add_unit_tests(test_quota
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_quota.c ${CMAKE_SOURCE_DIR}/server/control/quota.c)
target_include_directories(test_quota PRIVATE ${CMAKE_SOURCE_DIR}/server/control)
# The artifact store's local backend (server/artifacts/): content-addressed files, in a temporary
# directory.
ty_add_unit_tests(test_artifact_store
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_artifact_store.c
          ${CMAKE_SOURCE_DIR}/server/artifacts/artifact.c
          ${CMAKE_SOURCE_DIR}/server/artifacts/artifact_local.c
          ${CMAKE_SOURCE_DIR}/server/artifacts/archive.c
          ${CMAKE_SOURCE_DIR}/server/artifacts/shared.c
  LIBS tycommon)
target_include_directories(test_artifact_store PRIVATE ${CMAKE_SOURCE_DIR}/server/artifacts)

# Checkpoint retention (server/artifacts/retention.c): the pure selection of num_to_keep.
ty_add_unit_tests(test_retention
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_retention.c ${CMAKE_SOURCE_DIR}/server/artifacts/retention.c)
target_include_directories(test_retention PRIVATE ${CMAKE_SOURCE_DIR}/server/artifacts)

# Naming hangs (server/control/hang.c): the verdict and the text of the job event.
ty_add_unit_tests(test_hang
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_hang.c ${CMAKE_SOURCE_DIR}/server/control/hang.c)
target_include_directories(test_hang PRIVATE ${CMAKE_SOURCE_DIR}/server/control)
# The dashboard's file server: allowed paths, the URLs it claims, where it finds the build
# (server/http/static.c).
ty_add_unit_tests(test_static
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_static.c
  LIBS tyserver)

# slurmrestd request bodies and answers (server/slurm/slurm_req.c), without Slurm.
ty_add_unit_tests(test_slurm_req
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_slurm_req.c ${CMAKE_SOURCE_DIR}/server/slurm/slurm_req.c
  LIBS PkgConfig::JANSSON)
target_include_directories(test_slurm_req PRIVATE ${CMAKE_SOURCE_DIR}/server/slurm)
# The blocks of report_blocks summed up by the control thread (server/control/report_fold.c).
ty_add_unit_tests(test_report_fold
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_report_fold.c
          ${CMAKE_SOURCE_DIR}/server/control/report_fold.c
  LIBS tycommon PkgConfig::JANSSON m)
target_include_directories(test_report_fold PRIVATE ${CMAKE_SOURCE_DIR}/server
  ${CMAKE_SOURCE_DIR}/server/control ${CMAKE_SOURCE_DIR}/server/store ${CMAKE_SOURCE_DIR})
