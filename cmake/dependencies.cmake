# Every dependency comes from a Debian package (scripts/setup.sh installs
# them); nothing is downloaded at configure time.
find_package(Threads REQUIRED)

# moodycamel::ConcurrentQueue (libconcurrentqueue-dev) has no CMake package.
find_path(LIVEPROF_CONCURRENTQUEUE_INCLUDE concurrentqueue/concurrentqueue.h REQUIRED)
add_library(concurrentqueue INTERFACE)
target_include_directories(concurrentqueue SYSTEM INTERFACE ${LIVEPROF_CONCURRENTQUEUE_INCLUDE})

# libboost1.81-dev: Beast and Asio, header-only — in four translation units
# only: src/web's listener, http_session and websocket_session, and
# src/ingest/ingest_server.cc. Never Boost::system: not needed in 1.81.
# libboost-url1.81-dev: Boost.URL, a compiled library (Boost::url): request
# targets' parsing and %-decoding (src/web's rest.cc and static_files.cc).
find_package(Boost 1.81 CONFIG REQUIRED COMPONENTS headers url)

# libflatbuffers-dev + flatbuffers-compiler: the binary wire (src/stream/liveprof.fbs).
# flatbuffers::flatc generates the C++ header at build time; flatbuffers::flatbuffers
# is the runtime (builder, verifier). The package's config is "FlatBuffers": case matters.
find_package(FlatBuffers CONFIG REQUIRED)

# zlib1g-dev: gzip trace files (src/import) and the CRC-32 of the trace store's
# segments (src/aggregators); libsimdjson-dev: trace files' JSON (src/import).
if(NOT LIVEPROF_STREAM_TESTS_ONLY)
  find_package(ZLIB REQUIRED)
  find_package(simdjson CONFIG REQUIRED)
  # libprotobuf-dev + protobuf-compiler: XPlane trace files (src/import/xplane.proto).
  find_package(Protobuf REQUIRED)
endif()

# libcli11-dev (2.1, header-only): the liveprof command line (src/app).
if(NOT LIVEPROF_STREAM_TESTS_ONLY)
  find_package(CLI11 CONFIG QUIET)
  if(NOT CLI11_FOUND)
    message(FATAL_ERROR "CLI11 not found: the liveprof command line (src/app) needs Debian's "
                        "libcli11-dev (scripts/setup.sh installs it: apt-get install libcli11-dev)")
  endif()
endif()

# libnats-dev (3.4, the C client with JetStream): the fleet (src/fleet).
# Through pkg-config: Debian's cnats-config.cmake names libnats_static.a,
# which the package does not ship, and fails any find_package(cnats).
if(NOT LIVEPROF_STREAM_TESTS_ONLY)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(NATS QUIET IMPORTED_TARGET libnats)
  if(NOT NATS_FOUND)
    message(FATAL_ERROR "cnats not found: the fleet (src/fleet) needs Debian's libnats-dev "
                        "(scripts/setup.sh installs it: apt-get install libnats-dev)")
  endif()
endif()

# nlohmann-json3-dev: alert rule files (aggregators), tests.
find_package(nlohmann_json 3 CONFIG REQUIRED)

if(LIVEPROF_BUILD_TESTS)
  find_package(doctest CONFIG REQUIRED)  # doctest-dev; adds doctest.cmake to the module path.
  include(doctest)
endif()
if(LIVEPROF_BUILD_BENCH AND NOT LIVEPROF_SANITIZE)
  find_package(benchmark CONFIG REQUIRED)  # libbenchmark-dev
endif()
