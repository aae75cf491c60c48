# `make package` (cpack -G DEB in the release build): one Debian package, sluice, with the two
# programs, the service's config and its systemd unit (the runtime and service components of
# SluiceInstall.cmake; the libraries and headers stay with `cmake --install`). dpkg-shlibdeps
# computes Depends from the binaries. docs/install.md.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME sluice)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "sluice maintainers")
set(CPACK_PACKAGE_CONTACT "sluice maintainers <maintainers@users.noreply.a-seed-ea129e2b.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "rate limit server (HTTP JSON API, Envoy RLS v3) and CLI")
set(CPACK_PACKAGE_DESCRIPTION "sluiced answers rate limit checks over an HTTP JSON API and \
Envoy's gRPC rate limit service, from a YAML config, with counters in memory or in Redis. sluice \
is its command-line companion.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Two components in one package: a component install (a monolithic one would take the default
# components, dev included, and not the service's).
set(CPACK_COMPONENTS_ALL runtime service)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles
  ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
  ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
  ${PROJECT_SOURCE_DIR}/packaging/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# The package goes to build/package/, away from the build's own files.
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/package)
include(CPack)
