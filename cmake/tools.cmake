# Warnings, -Werror and sanitizers for our own targets only (never for the
# system headers of Boost, FlatBuffers, moodycamel, nlohmann, doctest).

# liveprof_defaults(<target> [COMPILE_FAST]): the flags every target of
# ours gets. In the ASan+UBSan build our code is -O1, as the sanitizers
# advise, but COMPILE_FAST targets are -O0: Beast's templates (src/web), the
# command line and the test files compile about 3 times faster so, and the
# suites spend little time in them (the test files whose loops they do
# spend it in are -O1 again: tests/CMakeLists.txt). In the TSan build
# (-O1) the COMPILE_FAST libraries, Beast's templates and the command line,
# are -O0 too (a Beast TU: 43 s at -O1, 21 s at -O0, clang 14 under TSan);
# the test files stay -O1 there (tests/CMakeLists.txt).
function(liveprof_defaults target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "COMPILE_FAST" "" "")
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>)
  if(LIVEPROF_SANITIZE STREQUAL "address" AND NOT arg_COMPILE_FAST)
    target_compile_options(${target} PRIVATE -O1)
  elseif(LIVEPROF_SANITIZE STREQUAL "thread" AND arg_COMPILE_FAST)
    target_compile_options(${target} PRIVATE -O0)
  endif()
endfunction()

if(LIVEPROF_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer -O0 -g1)
  add_link_options(-fsanitize=address,undefined)
  # For the tests that size their work to the build (GCC's __SANITIZE_ADDRESS__
  # is not defined by clang 14).
  add_compile_definitions(LIVEPROF_SANITIZED_ADDRESS=1)
elseif(LIVEPROF_SANITIZE STREQUAL "thread")
  # GCC 12 warns that atomic_thread_fence is unsupported under TSan (it is
  # used by Asio and moodycamel); -Wno-tsan keeps -Werror usable.
  add_compile_options(-fsanitize=thread -O1 -g1)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-tsan)
  endif()
  add_link_options(-fsanitize=thread)
  add_compile_definitions(LIVEPROF_SANITIZED_THREAD=1)
elseif(NOT LIVEPROF_SANITIZE STREQUAL "")
  message(FATAL_ERROR "LIVEPROF_SANITIZE must be '', 'address' or 'thread', not '${LIVEPROF_SANITIZE}'")
endif()

# --- position-independent copies (src/attach's shared library) ---
# liveprof_pic_copy(<copy> <target>): <target>'s sources, include dirs,
# definitions and options, compiled again as position-independent code.
function(liveprof_pic_copy copy target)
  get_target_property(srcs ${target} SOURCES)
  get_target_property(dir ${target} SOURCE_DIR)
  list(TRANSFORM srcs PREPEND "${dir}/" REGEX "^[^/]")
  add_library(${copy} STATIC ${srcs})
  set_target_properties(${copy} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${copy} PUBLIC $<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>)
  target_compile_definitions(${copy} PUBLIC $<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>)
  target_compile_options(${copy} PRIVATE $<TARGET_PROPERTY:${target},COMPILE_OPTIONS>)
endfunction()

