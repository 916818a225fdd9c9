# `cmake --install build --prefix P` installs what a C++ program outside this
# tree needs to record events with the host API and send them to a liveprof
# server (docs/features.md, "Instrumenting a C++ program"):
#
#   P/include/liveprof/{base,stream,producers,ingest}/*.h  (and the wire's
#                                                 generated header)
#   P/lib/libliveprof_{base,stream,producers,ingest_frames,ingest_client}.a
#   P/lib/cmake/liveprof/                         the CMake package
#
# and a project uses it as
#
#   find_package(liveprof 0.1 CONFIG REQUIRED)   # CMAKE_PREFIX_PATH=P
#   target_link_libraries(app PRIVATE liveprof::producers liveprof::ingest_client)
#
# liveprof::producers is the host API (host_api.h); liveprof::ingest_client
# the sender (LIVEPROF_SERVER=unix:/path or tcp:127.0.0.1:PORT connects it;
# global_sender.h). Static libraries, not position-independent: for an
# executable. A shared object or another language loads libliveprof.so (the
# C ABI, docs/attach.md) instead. The command line and the dashboard are
# installed by pip (docs/features.md), not here.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(LIVEPROF_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/liveprof)
set(LIVEPROF_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/liveprof)
# target = export name (liveprof::<name>)
set(LIVEPROF_INSTALLED base stream producers ingest_frames ingest_client)
foreach(name IN LISTS LIVEPROF_INSTALLED)
  set_target_properties(liveprof_${name} PROPERTIES EXPORT_NAME ${name})
  target_include_directories(liveprof_${name} INTERFACE $<INSTALL_INTERFACE:${LIVEPROF_INSTALL_INCLUDEDIR}>)
  install(TARGETS liveprof_${name} EXPORT liveprofTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endforeach()
# Their headers, as the sources include them ("producers/host_api.h").
foreach(folder IN ITEMS base stream producers ingest)
  install(DIRECTORY src/${folder}/ DESTINATION ${LIVEPROF_INSTALL_INCLUDEDIR}/${folder} FILES_MATCHING PATTERN "*.h")
endforeach()
install(FILES ${LIVEPROF_FBS_HEADER} DESTINATION ${LIVEPROF_INSTALL_INCLUDEDIR}/stream)

install(EXPORT liveprofTargets NAMESPACE liveprof:: DESTINATION ${LIVEPROF_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/liveprofConfig.cmake.in ${PROJECT_BINARY_DIR}/liveprofConfig.cmake
  INSTALL_DESTINATION ${LIVEPROF_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/liveprofConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/liveprofConfig.cmake ${PROJECT_BINARY_DIR}/liveprofConfigVersion.cmake
  DESTINATION ${LIVEPROF_INSTALL_CMAKEDIR})
