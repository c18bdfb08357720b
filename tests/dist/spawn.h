// Test helper: fork+exec of worker programs with an environment, their output
// captured in a temp file, and a wait with a deadline that SIGKILLs stragglers,
// so a multi-process test can fail but never hang.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tcv::test {

struct Child {
  pid_t pid = -1;
  std::string out_path;  // stdout and stderr
  int status = -1;       // exit code, or 128 + signal; -1 while running
};

/// Starts `argv` with the current environment plus `env` (overriding).
inline Child spawn(const std::vector<std::string>& argv,
                   const std::map<std::string, std::string>& env) {
  Child c;
  char path[] = "/tmp/tcv_test_outXXXXXX";
  const int fd = mkstemp(path);
  c.out_path = path;
  // Build argv/envp before fork: only async-signal-safe calls after it.
  std::vector<std::string> env_strs;
  for (char** e = environ; *e; ++e) {
    const std::string s = *e;
    const std::string key = s.substr(0, s.find('='));
    if (!env.count(key)) env_strs.push_back(s);
  }
  for (const auto& [k, v] : env) env_strs.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strs) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  c.pid = fork();
  if (c.pid == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(fd);
  return c;
}

/// Waits for every child until `timeout` passes, then SIGKILLs the rest
/// (their status becomes 128 + 9). Returns false when any had to be killed.
inline bool wait_all(std::vector<Child>& kids, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool in_time = true;
  for (;;) {
    bool running = false;
    for (auto& k : kids) {
      if (k.status != -1) continue;
      int st = 0;
      const pid_t r = waitpid(k.pid, &st, WNOHANG);
      if (r == k.pid)
        k.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      else
        running = true;
    }
    if (!running) return in_time;
    if (std::chrono::steady_clock::now() > deadline) {
      in_time = false;
      for (auto& k : kids)
        if (k.status == -1) kill(k.pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace tcv::test
