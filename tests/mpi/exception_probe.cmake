# Runs exception_probe under mpirun and checks that the job ended by itself (not by the time limit) with the expected
# non-zero exit code and a message naming the exception. The limit is only a failure bound: the job ends within a
# second or two when the failing rank aborts it, and would otherwise wait for TENAX_COMM_TIMEOUT (set far above it).
#   cmake -DMPIEXEC=... -DPROBE=... -DMODE=... -DEXPECT_EXIT=... -DEXPECT_MESSAGE=... -P exception_probe.cmake
execute_process(
  COMMAND ${MPIEXEC} -n 2 ${PROBE} ${MODE}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err
  TIMEOUT 60)
set(text "${out}${err}")
message("${text}")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the job did not end by itself: ${rc}")
endif()
if(NOT rc EQUAL ${EXPECT_EXIT})
  message(FATAL_ERROR "mpirun exited with ${rc}, expected ${EXPECT_EXIT}")
endif()
string(FIND "${text}" "${EXPECT_MESSAGE}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the output does not name the exception ('${EXPECT_MESSAGE}')")
endif()
string(FIND "${text}" "FAILED" failed)
if(NOT failed EQUAL -1)
  message(FATAL_ERROR "a collective returned although rank 1 never joined it")
endif()
