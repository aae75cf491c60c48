// The CLI's --input: a file, or "-" for stdin, refused with a clear message when it cannot be
// read (missing, unreadable, a directory).
#ifndef SLUICE_CLI_INPUT_FILE_H_
#define SLUICE_CLI_INPUT_FILE_H_

#include <cstdio>
#include <memory>
#include <string>

#include "sluice/status.h"

namespace sluice::cli {

class InputFile {
 public:
  std::FILE* get() const { return file_ ? file_.get() : stdin; }

 private:
  friend Result<InputFile> OpenInput(const std::string& path);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_{nullptr, &std::fclose};
};

// "cannot open --input 'x': <why>" on failure.
Result<InputFile> OpenInput(const std::string& path);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_INPUT_FILE_H_
