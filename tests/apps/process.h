// Test helper: runs the tools (tcv-train, tcv-predict) as processes, started
// with posix_spawn (no fork of the threaded test process), their stdout and
// stderr in one file, with a deadline after which they are SIGKILLed.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tcv::testing {

/// A started process: its pid and the file holding its output.
struct Process {
  pid_t pid = -1;
  std::string out_path;
};

/// Starts argv[0] (a path) with `argv`, stdout and stderr to `out_path`.
inline Process start_process(const std::vector<std::string>& argv, const std::string& out_path) {
  Process p;
  p.out_path = out_path;
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (auto& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  const int rc = posix_spawn(&p.pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) p.pid = -1;
  return p;
}

/// Waits for `p` until `timeout`, then SIGKILLs it. Returns the exit status,
/// 128 + the signal that ended it, or -1 when it had to be killed.
inline int wait_process(const Process& p, std::chrono::milliseconds timeout) {
  if (p.pid <= 0) return -2;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int st = 0;
    const pid_t r = waitpid(p.pid, &st, WNOHANG);
    if (r == p.pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (std::chrono::steady_clock::now() > deadline) {
      kill(p.pid, SIGKILL);
      waitpid(p.pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

/// Whether `p` has exited (reaping it); its status goes to `status`.
inline bool has_exited(const Process& p, int& status) {
  int st = 0;
  if (waitpid(p.pid, &st, WNOHANG) != p.pid) return false;
  status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return true;
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Runs a command to its end (or the deadline): {status, output}.
struct RunResult {
  int status = -1;
  std::string output;
};
inline RunResult run_process(const std::vector<std::string>& argv, const std::string& out_path,
                             std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
  const Process p = start_process(argv, out_path);
  RunResult r;
  r.status = wait_process(p, timeout);
  r.output = read_text(out_path);
  return r;
}

}  // namespace tcv::testing
