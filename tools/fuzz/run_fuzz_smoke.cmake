# A short libFuzzer run for ctest: fresh seeds, a fresh corpus, SECONDS of
# fuzzing. Fails if the seeds cannot be written or the fuzzer finds a crash.
#   cmake -DFUZZER=... -DSEEDER=... -DWORK=... -DSECONDS=20 -P run_fuzz_smoke.cmake
foreach(var FUZZER SEEDER WORK SECONDS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_fuzz_smoke.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus ${WORK}/artifacts)
execute_process(COMMAND ${SEEDER} ${WORK}/seeds RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "writing the seed corpus failed (${rc})")
endif()
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -max_len=4096 -timeout=10
          -rss_limit_mb=1024 -print_final_stats=1
          -artifact_prefix=${WORK}/artifacts/ ${WORK}/corpus ${WORK}/seeds
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzzer failed (${rc}); the input is in ${WORK}/artifacts")
endif()
