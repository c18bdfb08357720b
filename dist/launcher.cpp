#include "dist/launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "kernels/base.h"

extern char** environ;

namespace tcv::dist {

namespace {

using Clock = std::chrono::steady_clock;

int parse_int(const std::string& flag, const std::string& v, int lo, int hi) {
  int x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  TCV_CHECK(ec == std::errc() && p == v.data() + v.size() && x >= lo && x <= hi, "[tcv-run] ", flag,
            " expects an integer in [", lo, ", ", hi, "], got '", v, "'");
  return x;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at - start));
    if (at == std::string::npos) break;
    start = at + 1;
  }
  return out;
}

volatile std::sig_atomic_t g_signal = 0;

void on_signal(int sig) {
  g_signal = sig;
}

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Copies a rank's pipe to `out_fd`, one whole line at a time with a prefix.
void pump(int in_fd, int out_fd, const std::string& prefix, std::mutex& mu) {
  std::string pending;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(in_fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    std::string out;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1)
      out += prefix + pending.substr(start, nl + 1 - start);
    pending.erase(0, start);
    if (!out.empty()) {
      std::lock_guard<std::mutex> lock(mu);
      write_all(out_fd, out.data(), out.size());
    }
  }
  if (!pending.empty()) {
    const std::string out = prefix + pending + "\n";
    std::lock_guard<std::mutex> lock(mu);
    write_all(out_fd, out.data(), out.size());
  }
  ::close(in_fd);
}

struct Rank {
  int local = 0;
  int global = 0;
  pid_t pid = -1;
  int status = -1;  // exit code or 128 + signal; -1 while running
};

}  // namespace

LaunchOptions parse_launch_args(const std::vector<std::string>& args, const EnvMap& env) {
  LaunchOptions o;
  bool have_port = false;
  bool have_nproc = false;
  size_t i = 0;
  auto value = [&](const std::string& flag) -> std::string {
    const std::string& a = args[i];
    if (a.size() > flag.size() && a[flag.size()] == '=') return a.substr(flag.size() + 1);
    TCV_CHECK(i + 1 < args.size(), "[tcv-run] ", flag, " needs a value");
    return args[++i];
  };
  auto is = [&](const std::string& flag) {
    const std::string& a = args[i];
    return a == flag || a.rfind(flag + "=", 0) == 0;
  };
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (is("--nproc-per-node") || is("--nproc_per_node")) {
      o.nproc_per_node = parse_int("--nproc-per-node", value("--nproc-per-node"), 1, 4096);
      have_nproc = true;
    } else if (is("--nnodes")) {
      o.nnodes = parse_int("--nnodes", value("--nnodes"), 1, 1 << 20);
    } else if (is("--node-rank") || is("--node_rank")) {
      o.node_rank = parse_int("--node-rank", value("--node-rank"), 0, 1 << 20);
    } else if (is("--master-addr") || is("--master_addr")) {
      o.master_addr = value("--master-addr");
      TCV_CHECK(!o.master_addr.empty(), "[tcv-run] --master-addr is empty");
    } else if (is("--master-port") || is("--master_port")) {
      o.master_port = parse_int("--master-port", value("--master-port"), 1, 65535);
      have_port = true;
    } else if (is("--max-restarts") || is("--max_restarts")) {
      o.max_restarts = parse_int("--max-restarts", value("--max-restarts"), 0, 1 << 20);
    } else if (a == "--quiet-others") {
      o.quiet_others = true;
    } else if (a.rfind("-", 0) == 0) {
      TCV_THROW("[tcv-run] unknown flag '", a,
                "' (known: --nproc-per-node, --nnodes, --node-rank, --master-addr, "
                "--master-port, --max-restarts, --quiet-others)");
    } else {
      break;  // the command starts here
    }
  }
  o.command.assign(args.begin() + static_cast<std::ptrdiff_t>(std::min(i, args.size())),
                   args.end());
  TCV_CHECK(have_nproc, "[tcv-run] --nproc-per-node N is required");
  TCV_CHECK(!o.command.empty(), "[tcv-run] no command given (tcv-run [options] -- CMD ARGS...)");
  TCV_CHECK(o.node_rank < o.nnodes, "[tcv-run] --node-rank ", o.node_rank,
            " must be below --nnodes ", o.nnodes);
  if (auto it = env.find("MASTER_PORT"); !have_port && it != env.end()) {
    int port = 0;
    const std::string& v = it->second;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), port);
    TCV_CHECK(ec == std::errc() && p == v.data() + v.size() && port >= 1 && port <= 65535,
              "[tcv-run] MASTER_PORT='", v,
              "' from the environment must be a port in [1, 65535] (or pass --master-port)");
    o.master_port = port;
  }
  return o;
}

int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  TCV_CHECK(fd >= 0, "[tcv-run] socket() failed: ", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    ::close(fd);
    TCV_THROW("[tcv-run] could not find a free port: ", std::strerror(err));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

EnvMap rank_env(const LaunchOptions& o, int local_rank, const std::string& cuda_visible_devices,
                int restart_count) {
  EnvMap env;
  const int world = o.nnodes * o.nproc_per_node;
  env["RANK"] = std::to_string(o.node_rank * o.nproc_per_node + local_rank);
  env["LOCAL_RANK"] = std::to_string(local_rank);
  env["WORLD_SIZE"] = std::to_string(world);
  env["LOCAL_WORLD_SIZE"] = std::to_string(o.nproc_per_node);
  env["MASTER_ADDR"] = o.master_addr;
  env["MASTER_PORT"] = std::to_string(o.master_port);
  env["TCV_RESTART_COUNT"] = std::to_string(restart_count);
  env["TCV_MAX_RESTARTS"] = std::to_string(o.max_restarts);
  if (!cuda_visible_devices.empty()) {
    const auto devices = split(cuda_visible_devices, ',');
    TCV_CHECK(static_cast<int>(devices.size()) >= o.nproc_per_node,
              "[tcv-run] CUDA_VISIBLE_DEVICES='", cuda_visible_devices, "' lists ", devices.size(),
              " device(s) for --nproc-per-node ", o.nproc_per_node);
    env["CUDA_VISIBLE_DEVICES"] = devices[static_cast<size_t>(local_rank)];
  }
  return env;
}

namespace {

struct GroupResult {
  int exit_code = 0;         // of the first rank that failed; 0 when all succeeded
  bool interrupted = false;  // SIGINT/SIGTERM reached the launcher
};

// One start of every local rank, until all have exited. `o.master_port` is resolved.
GroupResult run_group(const LaunchOptions& o, int restart) {
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string visible = cvd ? cvd : "";

  // Everything the children need, built before fork (only async-signal-safe calls after it).
  std::vector<std::vector<std::string>> envs(static_cast<size_t>(o.nproc_per_node));
  for (int l = 0; l < o.nproc_per_node; ++l) {
    const EnvMap extra = rank_env(o, l, visible, restart);
    auto& e = envs[static_cast<size_t>(l)];
    for (char** p = environ; *p; ++p) {
      const std::string s = *p;
      if (!extra.count(s.substr(0, s.find('=')))) e.push_back(s);
    }
    for (const auto& [k, v] : extra) e.push_back(k + "=" + v);
  }
  std::vector<std::string> argv_s = o.command;
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);

  std::mutex out_mu;
  std::vector<std::thread> pumps;
  std::vector<Rank> ranks(static_cast<size_t>(o.nproc_per_node));
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t launcher = ::getpid();
  for (int l = 0; l < o.nproc_per_node; ++l) {
    Rank& r = ranks[static_cast<size_t>(l)];
    r.local = l;
    r.global = o.node_rank * o.nproc_per_node + l;
    const bool pipe_it = r.global != 0 && !o.quiet_others;
    const bool silence = r.global != 0 && o.quiet_others;
    int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    if (pipe_it) {
      TCV_CHECK(::pipe2(out_pipe, O_CLOEXEC) == 0 && ::pipe2(err_pipe, O_CLOEXEC) == 0,
                "[tcv-run] pipe() failed: ", std::strerror(errno));
    }
    std::vector<char*> envp;
    for (auto& s : envs[static_cast<size_t>(l)]) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    TCV_CHECK(pid >= 0, "[tcv-run] fork() failed: ", std::strerror(errno));
    if (pid == 0) {
      // Die with the launcher (the thread that forked: this one, which waits
      // for the ranks); if it is already gone, do not start at all.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher) ::_exit(128 + SIGKILL);
      ::setpgid(0, 0);  // its own group: signals reach the rank's whole process tree
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      sigaction(SIGINT, &dfl, nullptr);
      sigaction(SIGTERM, &dfl, nullptr);
      if (pipe_it) {
        ::dup2(out_pipe[1], 1);
        ::dup2(err_pipe[1], 2);
      } else if (silence) {
        ::dup2(devnull, 1);
        ::dup2(devnull, 2);
      }
      environ = envp.data();
      ::execvp(argv[0], argv.data());
      const char msg[] = "tcv-run: exec failed: ";
      write_all(2, msg, sizeof(msg) - 1);
      write_all(2, argv[0], std::strlen(argv[0]));
      write_all(2, "\n", 1);
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    r.pid = pid;
    if (pipe_it) {
      ::close(out_pipe[1]);
      ::close(err_pipe[1]);
      const std::string prefix = "[rank " + std::to_string(r.global) + "] ";
      pumps.emplace_back(pump, out_pipe[0], 1, prefix, std::ref(out_mu));
      pumps.emplace_back(pump, err_pipe[0], 2, prefix, std::ref(out_mu));
    }
  }
  if (devnull >= 0) ::close(devnull);

  GroupResult result;
  bool stopping = false;
  Clock::time_point kill_at{};
  bool killed = false;
  auto signal_all = [&](int sig) {
    for (const Rank& r : ranks)
      if (r.status == -1) ::kill(-r.pid, sig);
  };
  auto stop_all = [&](int sig) {
    stopping = true;
    signal_all(sig);
    signal_all(SIGCONT);  // a stopped (SIGSTOP) rank acts on the signal only once continued
    kill_at = Clock::now() + o.kill_grace;
  };
  for (;;) {
    bool running = false;
    for (Rank& r : ranks) {
      if (r.status != -1) continue;
      int st = 0;
      const pid_t w = ::waitpid(r.pid, &st, WNOHANG);
      if (w != r.pid) {
        running = true;
        continue;
      }
      r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      if (r.status != 0 && !stopping) {
        result.exit_code = r.status;
        std::lock_guard<std::mutex> lock(out_mu);
        if (WIFEXITED(st))
          std::fprintf(stderr,
                       "tcv-run: rank %d (pid %d) exited with code %d; stopping the other ranks\n",
                       r.global, static_cast<int>(r.pid), r.status);
        else
          std::fprintf(
              stderr,
              "tcv-run: rank %d (pid %d) was killed by signal %d (%s); stopping the other ranks\n",
              r.global, static_cast<int>(r.pid), WTERMSIG(st), strsignal(WTERMSIG(st)));
        std::fflush(stderr);
        stop_all(SIGTERM);
      }
    }
    if (!running) break;
    if (g_signal != 0) {
      const int sig = g_signal;
      g_signal = 0;
      signal_all(sig);
      if (!stopping) {
        stop_all(sig);
        result.exit_code = 128 + sig;
        result.interrupted = true;
      }
    }
    if (stopping && !killed && Clock::now() > kill_at) {
      killed = true;
      signal_all(SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& t : pumps) t.join();
  return result;
}

}  // namespace

int launch(LaunchOptions o) {
  const bool fixed_port = o.master_port != 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  GroupResult g;
  for (int restart = 0;; ++restart) {
    if (!fixed_port) o.master_port = o.nnodes == 1 ? pick_free_port() : 29500;
    if (restart > 0) {
      std::fprintf(stderr,
                   "tcv-run: restart %d of %d: starting all %d local rank(s) again "
                   "(rendezvous on %s:%d)\n",
                   restart, o.max_restarts, o.nproc_per_node, o.master_addr.c_str(), o.master_port);
      std::fflush(stderr);
    }
    g = run_group(o, restart);
    if (g.exit_code == 0 || g.interrupted || g_signal != 0) break;
    if (restart >= o.max_restarts) {
      if (o.max_restarts > 0) {
        std::fprintf(stderr, "tcv-run: no restarts left (%d used); exiting with code %d\n",
                     o.max_restarts, g.exit_code);
        std::fflush(stderr);
      }
      break;
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return g.exit_code;
}

}  // namespace tcv::dist
