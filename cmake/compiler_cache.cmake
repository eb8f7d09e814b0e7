# Compiles through ccache when it is installed (scripts/setup.sh installs it), so CI and a
# developer's second build reuse the objects of earlier builds, also those of another clone:
# ccache's cache lives outside the clone (~/.cache/ccache), base_dir keys the paths under the
# source tree relative to it, and hash_dir off keeps the build folder out of the key (debug info
# then names the folder of the build that filled the cache: only -g1 line tables for sanitizer
# reports, where the relative file names still say which file).
# STRATA_COMPILER_LAUNCHER is the launcher, also for the fuzz sub-build (tests/CMakeLists.txt).
option(STRATA_CCACHE "Compile through ccache when it is installed" ON)
set(STRATA_COMPILER_LAUNCHER "")
if(STRATA_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(STRATA_CCACHE_PROGRAM ccache)
  if(STRATA_CCACHE_PROGRAM)
    set(STRATA_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${CMAKE_SOURCE_DIR}
        CCACHE_NOHASHDIR=1 ${STRATA_CCACHE_PROGRAM})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${STRATA_COMPILER_LAUNCHER})
    message(STATUS "strata: compiling through ${STRATA_CCACHE_PROGRAM}")
  endif()
endif()
