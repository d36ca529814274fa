# Test registration. Every test binary links tessera_test_main, which starts the Runtime
# and makes each test fail on every rank when it fails on any rank.
#
#   tessera_add_test(<name> SOURCES ... [DEPS ...] [LABELS ...])
#       one process, no launcher; label `unit`.
#   tessera_add_mpi_test(<name> SOURCES ... RANKS 1 2 3 4 [DEPS ...] [LABELS ...] [ARGS ...])
#       one ctest entry per rank count, `<name>_npN`, run as `mpiexec -n N`; label `mpi`.
#   tessera_add_slurm_test(<name> RANKS <n> COMMAND <program> [args...] [TIMEOUT <s>] [LABELS ...])
#       `<name>_np<n>`, run as `srun --mpi=pmi2 -n <n>` under a private one-node Slurm; label `slurm`.
# In CUDA builds every test also carries the label `cuda`: it needs a GPU to run.
# TESSERA_TEST_LAUNCHER (a list) runs before every test program, inside mpiexec for MPI
# tests: scripts/gpu-check.sh sets it to compute-sanitizer; changing it only regenerates
# the test list, nothing is recompiled.

set(TESSERA_TEST_TIMEOUT 300 CACHE STRING "Seconds before ctest kills a hung test")
set(TESSERA_MPIEXEC_EXTRA_FLAGS "" CACHE STRING "Extra flags for mpiexec, before -n")
set(TESSERA_TEST_LAUNCHER "" CACHE STRING "Command (a list) that runs each test program, e.g. compute-sanitizer")

function(_tessera_test_executable name)
  cmake_parse_arguments(arg "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE tessera_test_main ${arg_DEPS})
  target_compile_options(${name} PRIVATE ${TESSERA_WARNINGS})
endfunction()

function(_tessera_test_properties test labels)
  if(TESSERA_ENABLE_CUDA)
    list(APPEND labels cuda)
  endif()
  set_tests_properties(${test} PROPERTIES LABELS "${labels}" TIMEOUT ${TESSERA_TEST_TIMEOUT})
  if(TESSERA_SANITIZE)
    set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT ${TESSERA_SANITIZE_ENV})
  endif()
endfunction()

function(tessera_add_test name)
  cmake_parse_arguments(arg "" "" "SOURCES;DEPS;LABELS;ARGS" ${ARGN})
  _tessera_test_executable(${name} SOURCES ${arg_SOURCES} DEPS ${arg_DEPS})
  add_test(NAME ${name} COMMAND ${TESSERA_TEST_LAUNCHER} $<TARGET_FILE:${name}> ${arg_ARGS})
  _tessera_test_properties(${name} "unit;${arg_LABELS}")
endfunction()

function(tessera_add_mpi_test name)
  cmake_parse_arguments(arg "" "" "SOURCES;DEPS;LABELS;RANKS;ARGS" ${ARGN})
  if(NOT arg_RANKS)
    message(FATAL_ERROR "tessera_add_mpi_test(${name}): say which RANKS it runs on")
  endif()
  _tessera_test_executable(${name} SOURCES ${arg_SOURCES} DEPS ${arg_DEPS})
  foreach(n IN LISTS arg_RANKS)
    add_test(NAME ${name}_np${n}
             COMMAND ${MPIEXEC_EXECUTABLE} ${TESSERA_MPIEXEC_EXTRA_FLAGS} ${MPIEXEC_NUMPROC_FLAG} ${n}
                     ${MPIEXEC_PREFLAGS} ${TESSERA_TEST_LAUNCHER} $<TARGET_FILE:${name}> ${MPIEXEC_POSTFLAGS}
                     ${arg_ARGS})
    _tessera_test_properties(${name}_np${n} "mpi;${arg_LABELS}")
    set_tests_properties(${name}_np${n} PROPERTIES PROCESSORS ${n})
  endforeach()
endfunction()

# tessera_add_failure_test(<name> EXPECT <regex> COMMAND <command...> [EXIT_CODE <n>] [LABELS ...])
# Passes when the command exits non-zero (EXIT_CODE exactly, when given) and prints
# something matching EXPECT.
function(tessera_add_failure_test name)
  cmake_parse_arguments(arg "" "EXPECT;EXIT_CODE" "COMMAND;LABELS" ${ARGN})
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DCOMMAND=${arg_COMMAND}" "-DEXPECT=${arg_EXPECT}" "-DEXIT_CODE=${arg_EXIT_CODE}"
                   -P ${PROJECT_SOURCE_DIR}/cmake/TesseraExpectFailure.cmake)
  _tessera_test_properties(${name} "${arg_LABELS}")
endfunction()

# tessera_add_slurm_test(<name> RANKS <n> COMMAND <program> [args...] [TIMEOUT <s>] [LABELS ...])
# Runs `srun --mpi=pmi2 -n <n> <program> [args...]` under a one-node Slurm that
# tests/slurm/run_under_slurm.sh starts for this test alone and tears down after it. SKIPPED
# (not failed) where no Slurm can be started: not root, or slurm-wlm / munge not installed.
# TIMEOUT (default 120 s) bounds the program; the ctest timeout adds room for the daemons.
set(TESSERA_SLURM_SKIP_CODE 77)  # the driver's exit status when it cannot start Slurm
function(tessera_add_slurm_test name)
  cmake_parse_arguments(arg "" "RANKS;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(NOT arg_RANKS OR NOT arg_COMMAND)
    message(FATAL_ERROR "tessera_add_slurm_test(${name}): say how many RANKS and which COMMAND to run")
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 120)
  endif()
  set(test ${name}_np${arg_RANKS})
  add_test(NAME ${test}
           COMMAND ${PROJECT_SOURCE_DIR}/tests/slurm/run_under_slurm.sh
                   --ranks ${arg_RANKS} --timeout ${arg_TIMEOUT} -- ${arg_COMMAND})
  _tessera_test_properties(${test} "slurm;${arg_LABELS}")
  # Daemon start (at most 55 s), srun's grace after a timeout and the teardown (25 s) on top.
  math(EXPR ctest_timeout "${arg_TIMEOUT} + 90")
  set_tests_properties(${test} PROPERTIES PROCESSORS ${arg_RANKS} TIMEOUT ${ctest_timeout}
                                          SKIP_RETURN_CODE ${TESSERA_SLURM_SKIP_CODE})
endfunction()
