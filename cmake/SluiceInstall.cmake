# What `cmake --install` puts where, and how another CMake project or pkg-config finds it.
#
#   sluice::sluice  the algorithms and the memory store (sluice_core, sluice_store, sluice_memory)
#   sluice::redis   the Redis store (sluice_redis; needs libhiredis, libssl, libcrypto to link)
#   sluice::client  the C++ SDK for sluiced (sluice_client), when that library exists
#
# One export set, sluiceTargets, holds every installed library under the namespace sluice::;
# each library keeps its own archive (libsluice_core.a, ...). The server's own layers (config,
# service, http, grpc) are not a library API and are not installed. Components:
#   runtime  /usr/bin/sluiced and /usr/bin/sluice
#   dev      headers, archives, CMake package, sluice.pc
#   service  /etc/sluice/sluice.yaml, /etc/default/sluiced and the systemd unit: absolute paths,
#            so they are left out of a plain `cmake --install` (which must be able to go to any
#            --prefix without touching /etc) and go into the Debian package (SluicePackage.cmake)
include(CMakePackageConfigHelpers)

set(SLUICE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)

# The names the targets have once installed: sluice::core, sluice::redis, ...
set(sluice_installed_libraries sluice_util sluice_core sluice_store sluice_memory sluice_redis)
set_target_properties(sluice_util PROPERTIES EXPORT_NAME util)
set_target_properties(sluice_core PROPERTIES EXPORT_NAME core)
set_target_properties(sluice_store PROPERTIES EXPORT_NAME store)
set_target_properties(sluice_memory PROPERTIES EXPORT_NAME memory)
set_target_properties(sluice_redis PROPERTIES EXPORT_NAME redis)

# The public headers need C++23 (<expected>): consumers get the standard from the targets.
target_compile_features(sluice_core PUBLIC cxx_std_23)

# sluice::sluice: everything an embedding program needs to limit in process. An interface
# library, because an executable already has the name `sluice`.
add_library(sluice_embedded INTERFACE)
set_target_properties(sluice_embedded PROPERTIES EXPORT_NAME sluice)
target_link_libraries(sluice_embedded INTERFACE sluice_core sluice_store sluice_memory)
list(APPEND sluice_installed_libraries sluice_embedded)
# The same names inside this build, so examples/cpp builds in the tree and out of it alike.
add_library(sluice::sluice ALIAS sluice_embedded)
add_library(sluice::redis ALIAS sluice_redis)
if(TARGET sluice_client)
  set_target_properties(sluice_client PROPERTIES EXPORT_NAME client)
  list(APPEND sluice_installed_libraries sluice_client)
endif()

# The release preset builds with LTO, whose objects GCC makes slim (GIMPLE only) by default:
# an installed archive of those links only with the same GCC and -flto. Fat objects carry
# machine code as well, so any C++23 compiler can link the installed libraries.
if(CMAKE_INTERPROCEDURAL_OPTIMIZATION AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  foreach(lib IN LISTS sluice_installed_libraries)
    get_target_property(type ${lib} TYPE)
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      target_compile_options(${lib} PRIVATE -ffat-lto-objects)
    endif()
  endforeach()
endif()

install(TARGETS ${sluice_installed_libraries}
  EXPORT sluiceTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# The headers of the installed libraries only: open_store.h and the store layers (leased,
# batched, over-limit cache) belong to libraries that are not installed.
set(sluice_public_headers
  # sluice_core
  adjustment.h algorithm.h calendar_window.h clock.h decision.h duration.h fixed_window.h gcra.h
  leaky_bucket.h limit_spec.h
  region_scope.h sliding_window_counter.h sliding_window_log.h stats_sink.h status.h time.h
  token_bucket.h
  # sluice_store
  decide_all.h limiter.h permits.h quota_sync.h scheduler.h store.h
  # sluice_memory, sluice_redis
  memory_store.h redis_store.h)
list(TRANSFORM sluice_public_headers PREPEND ${PROJECT_SOURCE_DIR}/include/sluice/)
install(FILES ${sluice_public_headers}
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sluice COMPONENT dev)
if(TARGET sluice_client)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/sluice/client
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sluice COMPONENT dev)
endif()

install(EXPORT sluiceTargets NAMESPACE sluice:: DESTINATION ${SLUICE_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(cmake/sluiceConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/sluiceConfig.cmake INSTALL_DESTINATION ${SLUICE_CMAKE_DIR})
# 0.x: a new minor version may change the API.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/sluiceConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/sluiceConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/sluiceConfigVersion.cmake
  DESTINATION ${SLUICE_CMAKE_DIR} COMPONENT dev)

# sluice.pc finds its prefix from where it lies (pkg-config's ${pcfiledir}), so that
# `cmake --install --prefix` anywhere gives a correct file.
file(RELATIVE_PATH SLUICE_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
configure_file(cmake/sluice.pc.in ${CMAKE_CURRENT_BINARY_DIR}/sluice.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/sluice.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

install(TARGETS sluiced sluice RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

# The service: Debian's places, whatever the prefix.
install(FILES packaging/sluice.yaml DESTINATION /etc/sluice COMPONENT service EXCLUDE_FROM_ALL)
# 0600: it may hold the Redis password (SLUICE_STORE).
install(FILES packaging/sluiced.default DESTINATION /etc/default RENAME sluiced
  PERMISSIONS OWNER_READ OWNER_WRITE
  COMPONENT service EXCLUDE_FROM_ALL)
install(FILES packaging/sluiced.service DESTINATION /lib/systemd/system
  COMPONENT service EXCLUDE_FROM_ALL)

# The manuals the unit's Documentation= points at.
install(FILES docs/server.md docs/configuration.md docs/install.md docs/security.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
