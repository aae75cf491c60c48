// --store-file and --global-store-file: a store address (which may hold a Redis password) read
// from a file, so that it is in neither the process's arguments (ps, /proc/PID/cmdline) nor its
// environment (/proc/PID/environ, inherited by children).
#ifndef SLUICE_SLUICED_STORE_FILE_H_
#define SLUICE_SLUICED_STORE_FILE_H_

#include <string>

#include "sluice/status.h"

namespace sluice::server {

// The file's content, trailing whitespace (the newline an editor or `echo` adds) removed. Refused:
// a file others may read or write (a password for everyone on the host is no secret: chmod
// o-rwx, as systemd's LoadCredential= copies are), an empty one, one of more than one line, or
// one larger than 64 KiB.
Result<std::string> ReadStoreFile(const std::string& path);

}  // namespace sluice::server

#endif  // SLUICE_SLUICED_STORE_FILE_H_
