# cmake -DPATH=<file> -P expect_no_output.cmake
# Fails if <file> or any of its temporaries (<file>.tmp-<pid>) exists: a failed
# conversion must leave nothing behind.
file(GLOB leftovers "${PATH}" "${PATH}.tmp-*")
if(leftovers)
  message(FATAL_ERROR "a failed conversion left files behind: ${leftovers}")
endif()
message("ok: no '${PATH}' nor temporaries of it")
