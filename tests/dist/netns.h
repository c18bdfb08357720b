// Several machines on this one, for tests of what crosses a network: each
// machine is a Linux network namespace with its own loopback and one
// interface (eth0, 10.77.0.<k+1>/24) on a shared switch (a bridge in a
// namespace of its own). Processes started through exec_prefix() see only
// their machine's network; the host name stays this machine's, which often
// resolves to 127.0.0.1 as on cloud images and in containers. Needs root and
// iproute2 (`ip netns`); ok() is false, with the reason, where they are
// missing. Everything made is removed by the destructor, and namespaces left
// by a test binary that was killed are removed by the next lab.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace tcv::test {

class NetnsLab {
 public:
  explicit NetnsLab(int machines) {
    if (geteuid() != 0) {
      reason_ = "needs root to make network namespaces";
      return;
    }
    ip_ = find_ip();
    if (ip_.empty()) {
      reason_ = "iproute2's ip is not installed (scripts/setup-deps.sh installs it)";
      return;
    }
    remove_stale();
    const std::string tag = "tcvlab-" + std::to_string(getpid()) + "-" + std::to_string(count()++);
    switch_ = tag + "-sw";
    if (!run(ip_ + " netns add " + switch_)) {
      reason_ = "cannot make a network namespace (ip netns add failed)";
      switch_.clear();
      return;
    }
    made_.push_back(switch_);
    bool ok = run(ip_ + " -n " + switch_ + " link add br0 type bridge") &&
              run(ip_ + " -n " + switch_ + " link set br0 up");
    for (int k = 0; ok && k < machines; ++k) {
      const std::string ns = tag + "-m" + std::to_string(k);
      const std::string port = "p" + std::to_string(k);
      ok = run(ip_ + " netns add " + ns);
      if (ok) made_.push_back(ns);
      ok = ok &&
           run(ip_ + " link add eth0 netns " + ns + " type veth peer name " + port + " netns " +
               switch_) &&
           run(ip_ + " -n " + switch_ + " link set " + port + " master br0") &&
           run(ip_ + " -n " + switch_ + " link set " + port + " up") &&
           run(ip_ + " -n " + ns + " addr add " + address(k) + "/24 dev eth0") &&
           run(ip_ + " -n " + ns + " link set eth0 up") &&
           run(ip_ + " -n " + ns + " link set lo up");
      machines_.push_back(ns);
    }
    if (!ok) reason_ = "cannot wire the namespaces (veth pairs, a bridge)";
  }

  ~NetnsLab() {
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) run(ip_ + " netns del " + *it);
  }
  NetnsLab(const NetnsLab&) = delete;
  NetnsLab& operator=(const NetnsLab&) = delete;

  bool ok() const { return reason_.empty(); }
  /// Why the lab could not be made ("" when it was).
  const std::string& skip_reason() const { return reason_; }
  int machines() const { return static_cast<int>(machines_.size()); }
  /// Machine k's address.
  static std::string address(int k) { return "10.77.0." + std::to_string(k + 1); }
  /// Runs argv on machine k: prepend this.
  std::vector<std::string> exec_prefix(int k) const {
    return {ip_, "netns", "exec", machines_[static_cast<size_t>(k)]};
  }
  /// Unplugs machine k from the switch: its packets go nowhere, its
  /// connections hang (no reset, no error) until timeouts end them.
  bool cut(int k) const { return set_port(k, "down"); }
  /// Plugs it back in.
  bool restore(int k) const { return set_port(k, "up"); }

 private:
  static int& count() {
    static int n = 0;
    return n;
  }

  static std::string find_ip() {
    for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
      if (access(p, X_OK) == 0) return p;
    return "";
  }

  static bool run(const std::string& cmd) {
    const int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
    return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
  }

  bool set_port(int k, const char* state) const {
    return run(ip_ + " -n " + switch_ + " link set p" + std::to_string(k) + " " + state);
  }

  // Namespaces of labs whose test process is gone (killed at a timeout).
  void remove_stale() const {
    std::FILE* f = popen((ip_ + " netns list 2>/dev/null").c_str(), "r");
    if (!f) return;
    char line[512];
    std::vector<std::string> stale;
    while (std::fgets(line, sizeof(line), f)) {
      std::string name = line;
      name = name.substr(0, name.find_first_of(" \n"));
      if (name.rfind("tcvlab-", 0) != 0) continue;
      const pid_t pid = static_cast<pid_t>(std::atol(name.c_str() + 7));
      if (pid > 0 && kill(pid, 0) != 0) stale.push_back(name);
    }
    pclose(f);
    for (const auto& n : stale) run(ip_ + " netns del " + n);
  }

  std::string ip_;
  std::string reason_;
  std::string switch_;
  std::vector<std::string> machines_;
  std::vector<std::string> made_;
};

}  // namespace tcv::test
