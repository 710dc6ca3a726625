# cmake -DCOMMAND=prog [-DARGS=a@@b] [-DENV=K=V@@K=V] [-DEXPECT=re1@@re2] [-DREJECT=re] [-DSKIP_CODE=77]
#       -P run_and_check.cmake
# Runs the program (with the extra environment), fails unless it exits 0, every EXPECT regex matches its
# combined stdout+stderr, and REJECT (if given) matches nothing. Lists use "@@" so they survive add_test.
# A program that exits with SKIP_CODE (it found no GPU) prints "run_and_check: skipped": give the test
# SKIP_REGULAR_EXPRESSION "run_and_check: skipped" and CTest reports it skipped.
string(REPLACE "@@" ";" _args "${ARGS}")
string(REPLACE "@@" ";" _env "${ENV}")
string(REPLACE "@@" ";" _expect "${EXPECT}")
execute_process(COMMAND ${CMAKE_COMMAND} -E env ${_env} ${COMMAND} ${_args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
message("${all}")
if(DEFINED SKIP_CODE AND rc EQUAL SKIP_CODE)
  message("run_and_check: skipped (${COMMAND} exited with ${rc})")
  return()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "run_and_check: ${COMMAND} exited with ${rc}")
endif()
foreach(re IN LISTS _expect)
  if(NOT all MATCHES "${re}")
    message(FATAL_ERROR "run_and_check: expected output matching '${re}'")
  endif()
endforeach()
if(REJECT AND all MATCHES "${REJECT}")
  message(FATAL_ERROR "run_and_check: output matches the rejected pattern '${REJECT}' ('${CMAKE_MATCH_0}')")
endif()
message("run_and_check: ok")
