# cmake -DCOMMAND=<list> -DEXPECT=<regex> [-DEXIT_CODE=<n>] -P TesseraExpectFailure.cmake
# Runs COMMAND and succeeds only if it exits non-zero (EXIT_CODE, when not empty) AND its
# output matches EXPECT: a test that bad input (or a failing rank) is reported clearly,
# not just that it failed.
cmake_policy(SET CMP0007 NEW)
list(FILTER COMMAND EXCLUDE REGEX "^$")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the command exited 0; a failure was expected")
endif()
if(NOT "${EXIT_CODE}" STREQUAL "" AND NOT rc EQUAL "${EXIT_CODE}")
  message(FATAL_ERROR "the command exited ${rc}; exit code ${EXIT_CODE} was expected")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not say what went wrong (expected /${EXPECT}/)")
endif()
message("ok: exit code ${rc}, and the output says /${EXPECT}/")
