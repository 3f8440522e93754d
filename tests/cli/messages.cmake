# What the CLI says to a person (included by tests/CMakeLists.txt, after resident_cli_check): each kind of
# command line the parser refuses, said in our words with the option, the value and an example, never the
# parser's own ("The following argument was not expected", "At Most 1 required", "Could not convert");
# the CPU demo's copies named as host memory copies and its reason for the CPU; every table within 100
# columns.
set(parser_words "not expected|At Most|Could not convert|required .* missing|Run with --help|File does not exist")
resident_cli_check(parse_unknown_option "demo|--frobnicate"
                   "EXPECT=unknown option '--frobnicate' for `resident demo`. its options are --device, --n"
                   "REJECT=${parser_words}" EXIT=109 "DOCS=${errors_md}")
resident_cli_check(parse_value_without_option "demo|extra"
                   "EXPECT=`resident demo` does not take the value 'extra' on its own. values follow their option"
                   "REJECT=${parser_words}" EXIT=109)
resident_cli_check(parse_single_dash "demo|-n|5"
                   "EXPECT=unknown option '-n' .*options take two dashes, e.g. `resident demo --n 1000000`"
                   "REJECT=${parser_words}" EXIT=109)
resident_cli_check(parse_option_of_another_command "info|--n|5"
                   "EXPECT=unknown option '--n' for `resident info`: --n belongs to `resident demo`"
                   "REJECT=${parser_words}" EXIT=109)
resident_cli_check(parse_flag_with_a_value "info|--measure=abc"
                   "EXPECT=--measure is a flag and takes no value \\(got 'abc'\\): give it alone, e.g. `resident info --measure`"
                   "REJECT=${parser_words}" EXIT=104 "DOCS=${errors_md}")
resident_cli_check(parse_option_without_value "bench|pipeline|--sizes"
                   "EXPECT=--sizes needs a value after it \\(N,N,...\\): e.g. `resident bench pipeline --sizes 20,22,24`"
                   "REJECT=${parser_words}" EXIT=114 "DOCS=${errors_md}")
resident_cli_check(parse_option_given_twice "demo|--gpus|2|--gpus|3"
                   "EXPECT=--gpus is given 2 times: give it once, e.g. `resident demo --gpus 2`"
                   "REJECT=${parser_words}" EXIT=114 "DOCS=${errors_md}")
resident_cli_check(parse_options_that_exclude "bench|stream|--pinned|--pageable"
                   "EXPECT=--pinned and --pageable exclude each other: give one of them, e.g. `resident bench stream --pinned`"
                   "REJECT=${parser_words}" EXIT=108 "DOCS=${errors_md}")
resident_cli_check(parse_value_refused_has_an_example "demo|--n|abc"
                   "EXPECT=--n: 'abc' is not a whole number.*e.g. `resident demo --n 1000000`"
                   "REJECT=${parser_words}" EXIT=105 "DOCS=${errors_md}")
# An option followed by another takes no value from it (a file named --stream written, --help never shown).
resident_cli_check(parse_an_option_is_no_value "demo|--device|cpu|--json|--stream"
                   "EXPECT=--json: needs a value before the next option \\('--stream'\\).*e.g. `resident demo --json"
                   "REJECT=${parser_words}" EXIT=105 MAX_WIDTH=100)
resident_cli_check(parse_help_is_no_value "info|--json|--help"
                   "EXPECT=--json: needs a value before the next option \\('--help'\\)" EXIT=105)
resident_cli_check(parse_options_before_the_command "--device|cpu|info"
                   "EXPECT='--device' comes before the command.*e.g. `resident info --device cpu`" EXIT=109)
resident_cli_check(parse_an_empty_list_entry "bench|matmul|--algos|naive,"
                   "EXPECT=--algos: 'naive,' has an empty entry" EXIT=105)
# Errors within 100 columns, without the library's source locations.
resident_cli_check(error_fits_100_columns "demo|--device|cpu|--n|17179869184"
                   "EXPECT=out of memory: demo --n 17179869184 needs" "REJECT=\\[(src|include|bench)/" MAX_WIDTH=100
                   EXIT=3)
# The variables the library reads later are refused before any output; a policy forbidding a command's
# transfers is named before it starts.
foreach(variable IN ITEMS "RESIDENT_TRANSFER_POLICY=bogus" "RESIDENT_POOL_LIMIT=abc" "RESIDENT_TRANSFER_POLICY=forbid")
  string(REGEX REPLACE "[=]" "_" id "${variable}")
  string(REGEX REPLACE "=(.*)" " is '\\1'" said "${variable}")
  add_test(NAME cli.environment_checked_first_${id}
           COMMAND ${CMAKE_COMMAND} -DCLI=${CMAKE_COMMAND}
                   "-DARGS=-E|env|${variable}|$<TARGET_FILE:resident_cli>|demo|--device|cpu|--n|4096|--reps|1"
                   "-DEXPECT=resident: error: ${said}" -DREJECT_STDOUT=. -DEXIT=1
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/cli_check.cmake)
  set_tests_properties(cli.environment_checked_first_${id} PROPERTIES LABELS cpu)
endforeach()
resident_cli_check(parse_missing_file "bench|matmul|--from|/nonexistent/m.json|--plot|m.png"
                   "EXPECT=--from: '/nonexistent/m.json' does not exist. give the --json output of an earlier run"
                   "REJECT=${parser_words}" EXIT=105)
resident_cli_check(parse_missing_folder "bench|guide|--examples|/nonexistent"
                   "EXPECT=--examples: '/nonexistent' does not exist. give the folder holding the built examples"
                   "REJECT=${parser_words}" EXIT=105)

# The CPU demo: copies within host memory, named so; why the CPU. (A dot for a space where the text is
# wrapped at 100 columns: where it breaks depends on the CPU's name.)
resident_cli_check(demo_cpu_names_host_copies "demo|--device|cpu|--n|4096|--reps|1"
                   "EXPECT=the.CPU.as.--device.cpu.asks.*in/call +out/call.*host.memory.copies.\\(no.bus.*bytes.copied"
                   "REJECT=H2D|D2H|over the bus" MAX_WIDTH=100 EXIT=0)
if(NOT RESIDENT_HAS_CUDA)
  add_test(NAME cli.demo_cpu_says_no_gpu_was_found
           COMMAND ${CMAKE_COMMAND} -DCLI=${CMAKE_COMMAND}
                   "-DARGS=-E|env|--unset=RESIDENT_DEVICE|$<TARGET_FILE:resident_cli>|demo|--n|4096|--reps|1"
                   "-DEXPECT=the.CPU.because.no.GPU.was.found.\\(this.build.has.no"
                   -DEXIT=0 -P ${CMAKE_CURRENT_SOURCE_DIR}/cli_check.cmake)
  set_tests_properties(cli.demo_cpu_says_no_gpu_was_found PROPERTIES LABELS cpu)
endif()
# info's CPU copy rate: its size, threads and repetitions said.
resident_cli_check(info_cpu_copy_rate_says_how "info"
                   "EXPECT=cpu's copy rate: a parallel memcpy of [0-9.]+ [MG]iB \\([0-9]+ threads.*median of [0-9]+ copies"
                   MAX_WIDTH=100 EXIT=0)

# Every benchmark's tables within 100 columns on the CPU (a wide table: headers over lines, then groups).
resident_cli_check(pipeline_fits_100_columns "bench|pipeline|--device|cpu|--sizes|10,12|--reps|2|--repeat|2"
                   "EXPECT=Spread over the 2 sweeps" MAX_WIDTH=100 EXIT=0)
resident_cli_check(small_fits_100_columns "bench|small|--device|cpu|--sizes|1000|--reps|2" MAX_WIDTH=100 EXIT=0)
resident_cli_check(rng_fits_100_columns "bench|rng|--device|cpu|--reps|1" MAX_WIDTH=100 EXIT=0)
resident_cli_check(flow_fits_100_columns "bench|flow|--device|cpu|--reps|2" MAX_WIDTH=100 EXIT=0)
resident_cli_check(jit_fits_100_columns "bench|jit|--device|cpu|--sizes|10|--reps|2" MAX_WIDTH=100 EXIT=0)
resident_cli_check(matmul_fits_100_columns "bench|matmul|--device|cpu|--sizes|16|--reps|1" MAX_WIDTH=100 EXIT=0)
resident_cli_check(foundation_fits_100_columns "bench|foundation|--device|cpu|--reps|1" MAX_WIDTH=100 EXIT=0)
resident_cli_check(guide_fits_100_columns "bench|guide|--device|cpu" MAX_WIDTH=100 EXIT=0)
# Many devices named in a few words, not one line per device name ("cpu x64").
resident_cli_check(demo_many_devices_fits_100_columns "demo|--device|cpu|--gpus|64|--n|100000|--reps|1"
                   "EXPECT=sharded over 64 devices.*\\(cpu.x64" MAX_WIDTH=100 EXIT=0)
# Every command's --help within 100 columns (descriptions wrapped under their column).
foreach(cmd IN ITEMS "" "info" "demo" "bench" "bench|pipeline" "bench|small" "bench|foundation" "bench|rng"
                     "bench|flow" "bench|jit" "bench|matmul" "bench|guide" "bench|dist" "bench|stream")
  string(REPLACE "|" "_" id "help_fits_100_columns_${cmd}")
  if(cmd STREQUAL "")
    set(help_args "--help")
  else()
    set(help_args "${cmd}|--help")
  endif()
  resident_cli_check(${id} "${help_args}" "EXPECT=Usage: resident" MAX_WIDTH=100 EXIT=0)
endforeach()
