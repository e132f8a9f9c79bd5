# Runs the command after "--" and passes when it exits with EXPECTED_EXIT (e.g. 1: mla-check caught a
# failure), printing its output either way. Usage:
#   cmake -DEXPECTED_EXIT=N -P expect_exit.cmake -- COMMAND ARGS...
cmake_policy(SET CMP0007 NEW)  # lists keep empty elements (dropped below on purpose)
set(_command)
set(_collect OFF)
foreach(_i RANGE ${CMAKE_ARGC})
  if(_collect)
    list(APPEND _command "${CMAKE_ARGV${_i}}")
  elseif("${CMAKE_ARGV${_i}}" STREQUAL "--")
    set(_collect ON)
  endif()
endforeach()
list(FILTER _command EXCLUDE REGEX "^$")
execute_process(COMMAND ${_command} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
message("${_out}${_err}")
if(NOT "${_rc}" STREQUAL "${EXPECTED_EXIT}")
  message(FATAL_ERROR "exit ${_rc}, expected ${EXPECTED_EXIT}: ${_command}")
endif()
