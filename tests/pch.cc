// The precompiled test headers' owner (tests/CMakeLists.txt): the header
// is all it builds.
