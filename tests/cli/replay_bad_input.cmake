# Drives the real `sluice replay` binary (cmake -P; needs -DSLUICE=<binary> -DFIXTURES=<dir>).
#
#  1. Every fixtures/bad_*.csv must exit 2 with exactly one stderr line matching the regex in the
#     sibling bad_*.expect, from a file and from stdin ('-'); whatever reached stdout before the
#     error must be whole jsonl decisions.
#  2. Bad flags exit 2 with a message naming the problem.
#  3. good_small.csv, piped on stdin, exits 0 with exactly the decisions in good_small.jsonl.
#  4. A failed write exits 1; a directory as --input exits 2.
cmake_minimum_required(VERSION 3.25)

if(NOT SLUICE OR NOT EXISTS "${SLUICE}")
  message(FATAL_ERROR "SLUICE must name the sluice binary (got '${SLUICE}')")
endif()
if(NOT FIXTURES OR NOT IS_DIRECTORY "${FIXTURES}")
  message(FATAL_ERROR "FIXTURES must name the fixtures directory (got '${FIXTURES}')")
endif()

set(failures 0)
macro(fail msg)
  message(SEND_ERROR "${msg}")
  math(EXPR failures "${failures} + 1")
endmacro()

set(base_args replay --algorithm token_bucket --limit 10 --per 1s)

# ---- 1. malformed traces ----

# Each failure the brief names must have its fixture: a glob over an emptied directory must not
# pass vacuously.
set(required_fixtures
  bad_time_not_number bad_time_decreasing bad_empty_key bad_cost_zero bad_too_many_fields
  bad_no_comma bad_invalid_utf8_key bad_negative_time)
foreach(name IN LISTS required_fixtures)
  if(NOT EXISTS "${FIXTURES}/${name}.csv")
    fail("missing fixture ${FIXTURES}/${name}.csv")
  endif()
endforeach()

file(GLOB bad_fixtures "${FIXTURES}/bad_*.csv")
list(SORT bad_fixtures)
list(LENGTH bad_fixtures bad_count)
if(bad_count LESS 8)
  fail("expected at least 8 bad_*.csv fixtures in ${FIXTURES}, found ${bad_count}")
endif()

foreach(csv IN LISTS bad_fixtures)
  get_filename_component(name "${csv}" NAME_WE)
  set(expect_file "${FIXTURES}/${name}.expect")
  if(NOT EXISTS "${expect_file}")
    fail("${name}: no ${name}.expect next to ${name}.csv")
    continue()
  endif()
  file(READ "${expect_file}" expect)
  string(STRIP "${expect}" expect)
  if(expect STREQUAL "")
    fail("${name}: ${name}.expect is empty")
    continue()
  endif()

  foreach(via file stdin)
    if(via STREQUAL "file")
      execute_process(COMMAND "${SLUICE}" ${base_args} --input "${csv}"
                      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    else()
      execute_process(COMMAND "${SLUICE}" ${base_args} --input -
                      INPUT_FILE "${csv}"
                      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    endif()
    string(REGEX REPLACE "\n$" "" err_line "${err}")
    if(NOT rc STREQUAL "2")
      fail("${name} (${via}): exit status '${rc}', expected 2; stderr: ${err}")
    elseif(err_line MATCHES "\n")
      fail("${name} (${via}): expected one stderr line, got:\n${err}")
    elseif(NOT err_line MATCHES "${expect}")
      fail("${name} (${via}): stderr\n  '${err_line}'\ndoes not match\n  '${expect}'")
    endif()
    # Decisions for the good lines before the bad one may be on stdout, but only whole ones.
    if(NOT out STREQUAL "")
      string(REGEX REPLACE "\n$" "" out_body "${out}")
      string(REPLACE "\n" ";" out_lines "${out_body}")
      foreach(line IN LISTS out_lines)
        if(NOT line MATCHES "^{\"t_ms\":[0-9]+,\"key\":\".*\",\"allowed\":(true|false),\"remaining\":[0-9]+,\"retry_after_ms\":[0-9]+}$")
          fail("${name} (${via}): stdout line is not a jsonl decision: '${line}'")
        endif()
      endforeach()
      if(NOT out MATCHES "\n$")
        fail("${name} (${via}): stdout ends in a partial line: '${out}'")
      endif()
    endif()
  endforeach()
endforeach()

# ---- 2. bad flags ----
# Each case: arguments after `replay` separated by '|', then '=>' and a stderr regex.
set(good_input "${FIXTURES}/good_small.csv")
set(flag_cases
  "--algorithm|nope|--limit|10|--per|1s|--input|${good_input}=>unknown --algorithm 'nope'"
  "--algorithm|token_bucket|--limit|10|--per|10|--input|${good_input}=>--per: invalid duration '10': missing unit"
  "--algorithm|token_bucket|--limit|10|--per|1fortnight|--input|${good_input}=>--per: invalid duration '1fortnight'"
  "--algorithm|token_bucket|--limit|-1|--per|1s|--input|${good_input}=>limit must be a positive number of requests \\(got -1\\)"
  "--algorithm|token_bucket|--limit|0|--per|1s|--input|${good_input}=>limit must be a positive number"
  "--algorithm|token_bucket|--limit|ten|--per|1s|--input|${good_input}=>--limit"
  "--algorithm|fixed_window|--limit|10|--per|1s|--burst|5|--input|${good_input}=>burst applies to token_bucket, gcra and leaky_bucket, not fixed_window"
  "--algorithm|token_bucket|--limit|10|--per|1s|--burst|-5|--input|${good_input}=>burst must not be negative"
  "--algorithm|token_bucket|--limit|10|--per|1s|--shaper|--input|${good_input}=>shaper applies only to leaky_bucket, not token_bucket"
  "--algorithm|token_bucket|--limit|10|--per|1s|--input|${FIXTURES}/does_not_exist.csv=>cannot open --input '.*does_not_exist.csv': No such file or directory"
  "--algorithm|token_bucket|--limit|10|--per|1s|--input|${good_input}|--output|xml=>--output must be jsonl or summary, not 'xml'"
  "--algorithm|token_bucket|--limit|10|--per|1s=>--input is required"
)
foreach(case IN LISTS flag_cases)
  string(FIND "${case}" "=>" split)
  string(SUBSTRING "${case}" 0 ${split} args)
  math(EXPR rx_begin "${split} + 2")
  string(SUBSTRING "${case}" ${rx_begin} -1 rx)
  string(REPLACE "|" ";" args "${args}")
  execute_process(COMMAND "${SLUICE}" replay ${args}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL "2")
    fail("replay ${args}: exit status '${rc}', expected 2; stderr: ${err}")
  elseif(NOT err MATCHES "${rx}")
    fail("replay ${args}: stderr\n  '${err}'\ndoes not match\n  '${rx}'")
  endif()
  if(NOT out STREQUAL "")
    fail("replay ${args}: a usage error must not write decisions, stdout: '${out}'")
  endif()
endforeach()

# ---- 3. a good trace on stdin ----
file(READ "${FIXTURES}/good_small.jsonl" want_jsonl)
execute_process(COMMAND "${SLUICE}" ${base_args} --input -
                INPUT_FILE "${good_input}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc STREQUAL "0")
  fail("good_small.csv on stdin: exit status '${rc}', expected 0; stderr: ${err}")
elseif(NOT err STREQUAL "")
  fail("good_small.csv on stdin: unexpected stderr: ${err}")
elseif(NOT out STREQUAL want_jsonl)
  fail("good_small.csv on stdin: stdout\n${out}\ndiffers from good_small.jsonl\n${want_jsonl}")
endif()

# The same trace named as a file gives the same bytes.
execute_process(COMMAND "${SLUICE}" ${base_args} --input "${good_input}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out_file ERROR_VARIABLE err)
if(NOT rc STREQUAL "0" OR NOT out_file STREQUAL want_jsonl)
  fail("good_small.csv as --input file: status '${rc}', stderr '${err}', stdout\n${out_file}")
endif()

# And the summary of it, on stdin.
execute_process(COMMAND "${SLUICE}" ${base_args} --input - --output summary
                INPUT_FILE "${good_input}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE summary ERROR_VARIABLE err)
if(NOT rc STREQUAL "0")
  fail("good_small.csv summary: exit status '${rc}'; stderr: ${err}")
else()
  string(JSON lines ERROR_VARIABLE json_err GET "${summary}" lines)
  if(json_err)
    fail("good_small.csv summary is not JSON (${json_err}):\n${summary}")
  else()
    string(JSON admitted GET "${summary}" admitted)
    string(JSON rejected GET "${summary}" rejected)
    string(JSON alice_admitted GET "${summary}" keys alice admitted)
    string(JSON alice_rejected GET "${summary}" keys alice rejected)
    string(JSON alice_max GET "${summary}" keys alice max_admitted_in_window)
    string(JSON bob_max GET "${summary}" keys bob max_admitted_in_window)
    string(JSON quoted_admitted GET "${summary}" keys "\"quoted\"" admitted)
    # alice admits 1+4+5 at 1000, 1 at 1100 and 1 at 2000; (1000, 2000] holds 1 + 1 of them.
    set(got "${lines} ${admitted} ${rejected} ${alice_admitted} ${alice_rejected} ${alice_max} ${bob_max} ${quoted_admitted}")
    set(want "10 7 3 5 3 11 2 1")
    if(NOT got STREQUAL want)
      fail("good_small.csv summary: lines/admitted/rejected/alice.admitted/alice.rejected/"
           "alice.max/bob.max/quoted.admitted = '${got}', expected '${want}'\n${summary}")
    endif()
  endif()
endif()

# ---- 4. output and input failures that are not the trace's fault ----

# A full disk must not look like success: exit 1 and say so.
if(EXISTS /dev/full)
  execute_process(COMMAND ${SLUICE} ${base_args} --input "${FIXTURES}/good_small.csv"
                  OUTPUT_FILE /dev/full RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc STREQUAL "1" OR NOT err MATCHES "cannot write the output")
    fail("writing to /dev/full: exit '${rc}', stderr '${err}' (want 1 and 'cannot write the output')")
  endif()
endif()
execute_process(COMMAND ${SLUICE} ${base_args} --input "${FIXTURES}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc STREQUAL "2" OR NOT err MATCHES "is a directory")
  fail("--input <directory>: exit '${rc}', stderr '${err}' (want 2 and 'is a directory')")
endif()

if(failures GREATER 0)
  message(FATAL_ERROR "${failures} replay CLI check(s) failed")
endif()
message(STATUS "replay CLI: ${bad_count} bad fixtures, flag and stdin checks passed")
