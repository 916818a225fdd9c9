# ctest runs the tests in descending order of COST (seconds, measured on the
# release build of session 39; the browser tests have theirs in
# CMakeLists.txt). Without it a clean build runs them in declaration order,
# and a one-minute test that starts last leaves a core idle at the end of
# the suite. Included by ctest after the discovered doctest cases; a name
# this build does not have is skipped (ASan's and TSan's have fewer). Tests
# declared with add_test in this folder are defined after this runs: theirs
# is set where they are declared.
cmake_policy(VERSION 3.20)
foreach(entry IN ITEMS
    "store at 10 M events: viewport queries equal brute force=60"
    "ingest: acknowledged events survive kill -9 of the server=38"
    "export keeps flows, args, metadata and process names of the H200 Kineto traces=25"
    "python: pip install . and the wheel in virtual environments=17"
    "export: a slow reader's large export does not hold up another client's view frames=11"
    "export: real Kineto and XPlane traces exported and read back give every view the same=10"
    "import: past 2 GiB, counts and byte positions stay exact (64-bit offsets)=9"
    "trace api: viewport, one event, search and export over real HTTP=8"
    "trace over the WebSocket: one tile per request, with its id, what /api/trace says=8"
    "import: every trace file in the folder imports or says why not=8"
    "python: pytorch example against liveprof serve=7")
  string(FIND "${entry}" "=" at REVERSE)
  string(SUBSTRING "${entry}" 0 ${at} name)
  math(EXPR at "${at} + 1")
  string(SUBSTRING "${entry}" ${at} -1 cost)
  set_tests_properties("${name}" PROPERTIES COST ${cost})
endforeach()
