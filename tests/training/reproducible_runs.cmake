# Runs the example twice as separate mpirun jobs and requires identical output (every step's loss and the final
# parameters checksum): the CPU fp32 path must be bitwise reproducible across processes, not only within one.
# Variables: MPIEXEC, NP_FLAG, EXAMPLE, ARGS (a ;-list).
foreach(run 1 2)
  execute_process(COMMAND ${MPIEXEC} ${NP_FLAG} 4 ${EXAMPLE} ${ARGS}
                  OUTPUT_VARIABLE out_${run} ERROR_VARIABLE err_${run} RESULT_VARIABLE rc_${run})
  if(NOT rc_${run} EQUAL 0)
    message(FATAL_ERROR "run ${run} failed with ${rc_${run}}:\n${out_${run}}\n${err_${run}}")
  endif()
endforeach()
string(REGEX MATCH "final parameters checksum: [0-9a-f]+" sum_1 "${out_1}")
if(NOT sum_1)
  message(FATAL_ERROR "no checksum line in the output:\n${out_1}")
endif()
if(NOT out_1 STREQUAL out_2)
  message(FATAL_ERROR "two identical runs differ:\n--- first\n${out_1}\n--- second\n${out_2}")
endif()
message(STATUS "identical: ${sum_1}")
