// Runs the real sluiced binary (SLUICED_BIN) as a child process for the end-to-end tests, with
// its log in a temp file, on a port it picks itself (--http 127.0.0.1:0; the port is read from
// its "listening on" log line, so no free-port race). The child dies with the test process.
#ifndef SLUICE_TESTS_SUPPORT_SLUICED_PROCESS_H_
#define SLUICE_TESTS_SUPPORT_SLUICED_PROCESS_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/wait_for.h"

namespace sluice::testing {

class SluicedProcess {
 public:
  // Starts `sluiced args...`; with wait_for_http, waits until it listens (port() > 0).
  explicit SluicedProcess(const std::vector<std::string>& args, bool wait_for_http = true) {
    char log_template[] = "/tmp/sluiced-test-log-XXXXXX";
    const int log_fd = mkstemp(log_template);
    log_path_ = log_template;
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      dup2(log_fd, 1);
      dup2(log_fd, 2);
      std::vector<char*> argv;
      std::string bin = SLUICED_BIN;
      argv.push_back(bin.data());
      std::vector<std::string> copy = args;
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
    close(log_fd);
    if (!wait_for_http) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline && port_ == 0) {
      const std::string log = Log();
      constexpr std::string_view kListening = "http: listening on 127.0.0.1:";
      if (const size_t at = log.find(kListening); at != std::string::npos) {
        port_ = std::atoi(log.c_str() + at + kListening.size());
        break;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~SluicedProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    unlink(log_path_.c_str());
  }
  SluicedProcess(const SluicedProcess&) = delete;
  SluicedProcess& operator=(const SluicedProcess&) = delete;

  int port() const { return port_; }

  void Signal(int sig) const {
    if (pid_ > 0) kill(pid_, sig);
  }

  // The exit status (or 128 + signal) once it exits, -1 if it is still running after `timeout`.
  int WaitExit(std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
    if (pid_ < 0) return exit_status_;
    const bool exited = WaitFor(
        [&] {
          int status = 0;
          if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
          pid_ = -1;
          exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          return true;
        },
        timeout);
    return exited ? exit_status_ : -1;
  }

  std::string Log() const {
    std::ifstream in(log_path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // Waits until the log holds `text` `count` times.
  bool WaitForLog(std::string_view text, int count = 1,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) const {
    return WaitFor(
        [&] {
          const std::string log = Log();
          int found = 0;
          for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) {
            ++found;
          }
          return found >= count;
        },
        timeout);
  }

  // The gRPC port it listens on (--grpc 127.0.0.1:0), from its "listening on" log line: waits
  // for the line; 0 if it does not come.
  // The forward-auth port (--forward-auth 127.0.0.1:0), from its "listening on" log line.
  int ForwardAuthPort() const {
    constexpr std::string_view kListening = "forward-auth: listening on 127.0.0.1:";
    if (!WaitForLog(kListening)) return 0;
    const std::string log = Log();
    return std::atoi(log.c_str() + log.find(kListening) + kListening.size());
  }

  int GrpcPort() const {
    constexpr std::string_view kListening = "grpc: listening on port ";
    if (!WaitForLog(kListening)) return 0;
    const std::string log = Log();
    return std::atoi(log.c_str() + log.find(kListening) + kListening.size());
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_status_ = -1;
  std::string log_path_;
};

// sluiced on `config` with HTTP on a port of its own (port()), gRPC off unless `flags` name
// --grpc, and `flags`; a test failure, with its log, when it does not listen.
inline std::unique_ptr<SluicedProcess> StartSluiced(const std::string& config,
                                                    const std::vector<std::string>& flags = {}) {
  std::vector<std::string> args = {"--config", config, "--http", "127.0.0.1:0"};
  if (std::find(flags.begin(), flags.end(), "--grpc") == flags.end()) {
    args.insert(args.end(), {"--grpc", "off"});
  }
  args.insert(args.end(), flags.begin(), flags.end());
  auto p = std::make_unique<SluicedProcess>(args);
  EXPECT_GT(p->port(), 0) << p->Log();
  return p;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_SLUICED_PROCESS_H_
