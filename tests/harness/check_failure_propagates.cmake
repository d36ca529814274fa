# Runs COMMAND (a list) and succeeds only if it exits non-zero and its output matches
# the regular expression EXPECT.
cmake_policy(SET CMP0007 NEW)
list(FILTER COMMAND EXCLUDE REGEX "^$")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the run exited 0 although a rank failed")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "rank 0 did not report the failing rank (expected /${EXPECT}/)")
endif()
message("ok: exit code ${rc}, failing rank reported")
