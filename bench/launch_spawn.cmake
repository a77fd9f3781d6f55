# launch_spawn: cost of starting N worker processes (fork as trainyard-agent does vs posix_spawn);
# docs/bench-launch.md. Not a CTest test.
add_executable(launch_spawn ${CMAKE_CURRENT_SOURCE_DIR}/launch_spawn.c)
target_compile_options(launch_spawn PRIVATE -O2)
