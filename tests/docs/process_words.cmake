# docs.process_words: the tracked text files of the checkout hold no words about how the work was
# done (who worked when, in which sitting, what was asked): they state what the project is and does.
# Fails listing FILE:LINE: TEXT for each match; skipped (exit 0, "SKIPPED: ...") outside a git
# checkout of this tree or without git.
#
#   cmake -DSOURCE_DIR=<checkout> -P tests/docs/process_words.cmake
#
# Searched: every tracked file as it is in the work tree (git grep), binary files aside (-I), and
# the JSON outputs under docs/results/ (raw tool output, not prose). The patterns are built from
# pieces so that this file does not match them itself.
cmake_minimum_required(VERSION 3.25)

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<checkout> -P ${CMAKE_CURRENT_LIST_FILE}")
endif()
find_program(_git git)
if(NOT _git)
  message("SKIPPED: no git to list the tracked files")
  return()
endif()
execute_process(COMMAND ${_git} -C ${SOURCE_DIR} rev-parse --show-toplevel RESULT_VARIABLE _rc
                OUTPUT_VARIABLE _top OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
file(REAL_PATH "${SOURCE_DIR}" _source)
if(_rc EQUAL 0)
  file(REAL_PATH "${_top}" _top)
endif()
if(NOT _rc EQUAL 0 OR NOT _top STREQUAL _source)
  message("SKIPPED: ${SOURCE_DIR} is not a git checkout of its own")
  return()
endif()

set(_s "ses")
string(APPEND _s "sion")
set(_patterns
    "\\b(${_s}s?|next ${_s}|helper ${_s}|wip/|lea[s]e)\\b"
    "twenty-[a-z]+ ${_s}"
    "(first|second|third|[a-z]+th) ${_s}"
    "the issue [a]sks")
set(_args)
foreach(_p IN LISTS _patterns)
  list(APPEND _args -e "${_p}")
endforeach()

execute_process(COMMAND ${_git} -C ${SOURCE_DIR} -c core.quotepath=off grep -n -I -i -E ${_args} --
                        . ":(exclude,glob)docs/results/**/*.json"
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(_rc EQUAL 1)
  message("docs.process_words: no match in the tracked text files of ${SOURCE_DIR}")
  return()
elseif(NOT _rc EQUAL 0)
  message(FATAL_ERROR "git grep failed (exit ${_rc}): ${_err}")
endif()

# FILE:LINE:TEXT per match; long lines shortened.
string(REPLACE ";" "\\;" _out "${_out}")
string(REPLACE "\n" ";" _lines "${_out}")
set(_report "")
set(_count 0)
foreach(_line IN LISTS _lines)
  if(_line STREQUAL "")
    continue()
  endif()
  math(EXPR _count "${_count} + 1")
  string(LENGTH "${_line}" _len)
  if(_len GREATER 200)
    string(SUBSTRING "${_line}" 0 197 _line)
    string(APPEND _line "...")
  endif()
  string(APPEND _report "  ${_line}\n")
endforeach()
string(REPLACE ";" " | " _shown "${_patterns}")
message("${_report}")
message(FATAL_ERROR "${_count} lines of tracked files (above, FILE:LINE:TEXT) say how the work was done; "
                    "patterns (case-insensitive): ${_shown}")
