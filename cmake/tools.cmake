# Warnings, -Werror and sanitizers for our own targets only (never for the
# system headers of Boost, FlatBuffers, moodycamel, nlohmann, doctest).

# liveprof_defaults(<target>): the flags every target of ours gets.
function(liveprof_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/src)
endfunction()

if(LIVEPROF_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer -O1 -g1)
  add_link_options(-fsanitize=address,undefined)
elseif(LIVEPROF_SANITIZE STREQUAL "thread")
  # GCC 12 warns that atomic_thread_fence is unsupported under TSan (it is
  # used by Asio and moodycamel); -Wno-tsan keeps -Werror usable.
  add_compile_options(-fsanitize=thread -O1 -g1 -Wno-tsan)
  add_link_options(-fsanitize=thread)
elseif(NOT LIVEPROF_SANITIZE STREQUAL "")
  message(FATAL_ERROR "LIVEPROF_SANITIZE must be '', 'address' or 'thread', not '${LIVEPROF_SANITIZE}'")
endif()
