#include "cli/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace sluice::cli {

Result<InputFile> OpenInput(const std::string& path) {
  InputFile input;
  if (path == "-") return input;
  input.file_.reset(std::fopen(path.c_str(), "rb"));
  if (!input.file_) {
    return MakeError("cannot open --input '" + path + "': " + std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fileno(input.file_.get()), &st) == 0 && S_ISDIR(st.st_mode)) {
    return MakeError("cannot open --input '" + path + "': it is a directory");
  }
  return input;
}

}  // namespace sluice::cli
