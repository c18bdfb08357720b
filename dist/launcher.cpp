#include "dist/launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "dist/log.h"
#include "dist/store.h"
#include "engine/error.h"

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
  int status = -1;         // exit code or 128 + signal; -1 while running
  std::string error_file;  // TCV_ERROR_FILE: what a tcv program says when it fails
};

// The ranks' keys of round r in tcv-run's store.
std::string round_prefix(int round) {
  return "/r" + std::to_string(round) + "/";
}

}  // namespace

LaunchOptions parse_launch_args(const std::vector<std::string>& args, const EnvMap& env) {
  LaunchOptions o;
  bool have_port = false;
  bool have_nproc = false;
  bool have_rdzv_timeout = false;
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
    } else if (is("--rdzv-timeout") || is("--rdzv_timeout")) {
      const std::string v = value("--rdzv-timeout");
      double secs = 0;
      const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), secs);
      TCV_CHECK(!v.empty() && ec == std::errc() && p == v.data() + v.size(),
                "[tcv-run] --rdzv-timeout expects seconds, got '", v, "'");
      o.rdzv_timeout = seconds_to_ms(secs, "[tcv-run] --rdzv-timeout", /*allow_zero=*/false);
      have_rdzv_timeout = true;
    } else if (a == "--quiet-others") {
      o.quiet_others = true;
    } else if (a.rfind("-", 0) == 0) {
      TCV_THROW("[tcv-run] unknown flag '", a,
                "' (known: --nproc-per-node, --nnodes, --node-rank, --master-addr, "
                "--master-port, --max-restarts, --rdzv-timeout, --quiet-others)");
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
  const DistTimeouts t = timeouts_from_env(env, {o.rdzv_timeout, o.wait_log_interval});
  if (!have_rdzv_timeout) o.rdzv_timeout = t.timeout;
  o.wait_log_interval = t.wait_log_interval;
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
  env["TCV_STORE_PREFIX"] = round_prefix(restart_count);
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

std::mutex& out_mutex() {
  static std::mutex mu;
  return mu;
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string seconds_str(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", std::chrono::duration<double>(d).count());
  return buf;
}

// What a failed rank wrote to its TCV_ERROR_FILE: the first line, shortened.
std::string read_error_file(const std::string& path) {
  if (path.empty()) return "";
  std::string text;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[4096];
  ssize_t n;
  while (text.size() < 4096 && (n = ::read(fd, buf, sizeof(buf))) > 0)
    text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  while (!text.empty() && (text.front() == '\n' || text.front() == ' ')) text.erase(0, 1);
  if (const size_t nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  if (text.size() > 600) text = text.substr(0, 600) + " ...";
  return text;
}

// A failure as the machines' tcv-runs tell each other through the store.
struct Failure {
  int64_t time_ms = 0;  // wall clock, to name the first of several
  int node = -1;
  int exit_code = 1;
  bool fatal = false;  // a restart cannot help: the machines disagree, or the user interrupted
  std::string what;    // "rank 1 (local rank 0, pid 42) was killed by signal 9 (Killed): ..."

  std::string encode() const {
    return std::to_string(time_ms) + " " + std::to_string(node) + " " + std::to_string(exit_code) +
           " " + (fatal ? "1" : "0") + " " + what;
  }
  static Failure decode(const std::string& s) {
    Failure f;
    std::istringstream is(s);
    int fatal = 0;
    is >> f.time_ms >> f.node >> f.exit_code >> fatal;
    f.fatal = fatal != 0;
    std::getline(is, f.what);
    if (!f.what.empty() && f.what.front() == ' ') f.what.erase(0, 1);
    return f;
  }
};

// The launcher's side of the job's store: the first machine hosts it, every
// machine's tcv-run is a client. Rounds: "/tcv-run/<round>/..." keys.
class Agent {
 public:
  explicit Agent(const LaunchOptions& o) : o_(o) {
    label_ = o.nnodes == 1 ? "tcv-run" : "tcv-run (node " + std::to_string(o.node_rank) + ")";
    TcpStoreOptions so;
    so.is_server = o.node_rank == 0;
    so.world_size = o.nnodes;
    so.timeout = o.rdzv_timeout;
    so.wait_log_interval = o.wait_log_interval;
    so.client_name = label_;
    so.server_name = "tcv-run on the first machine (--node-rank 0)";
    try {
      store_ = std::make_unique<TcpStore>(o.master_addr, o.master_port, so);
    } catch (const std::exception& e) {
      throw Error(std::string(so.is_server ? "cannot host the job's store: " : "") + e.what());
    }
    // Calls from here on poll; a store that does not answer within this is
    // unreachable for now, not lost.
    store_->set_timeout(std::min(o.rdzv_timeout, std::chrono::milliseconds(2000)));
  }

  const std::string& label() const { return label_; }
  std::string where() const { return o_.master_addr + ":" + std::to_string(o_.master_port); }

  void say(const std::string& msg) const {
    const std::string line = label_ + ": " + msg + "\n";
    std::lock_guard<std::mutex> lock(out_mutex());
    write_all(2, line.data(), line.size());
  }

  // Joins `round` and waits until all --nnodes machines have, then checks
  // that they describe the same job. Throws with the reason (published, so
  // every machine stops) when they disagree, two claim one --node-rank, a
  // failure is published meanwhile, or the machines do not all join in time.
  void join(int round) {
    const std::string base = key(round, "");
    const std::string me = std::to_string(o_.node_rank);
    if (call([&] { return store_->add(base + "claim/" + me, 1); }) != 1)
      fail_fatal(round, "two machines were started with --node-rank " + me +
                            " (each machine needs its own, from 0 to --nnodes - 1)");
    call([&] {
      store_->set(base + "node/" + me, shape());
      return 0;
    });
    call([&] { return store_->add(base + "joined", 1); });
    const auto t0 = Clock::now();
    auto next_log = t0 + o_.wait_log_interval;
    for (;;) {
      if (auto f = published(round)) throw RoundFailed(*f);
      call([&] { return store_->add(base + "alive/" + me, 1); });
      const int64_t joined = call([&] { return store_->add(base + "joined", 0); });
      if (joined >= o_.nnodes) break;
      const auto now = Clock::now();
      if (now - t0 >= o_.rdzv_timeout)
        fail_fatal(round, missing_nodes(round) + " did not join round " + std::to_string(round) +
                              " within " + seconds_str(o_.rdzv_timeout) + " (" +
                              std::to_string(joined) + " of " + std::to_string(o_.nnodes) +
                              " machines joined at " + where() +
                              "; is tcv-run running there, with this --master-addr and "
                              "--master-port?)");
      if (o_.wait_log_interval.count() > 0 && now >= next_log) {
        next_log += o_.wait_log_interval;
        say("waiting for " + missing_nodes(round) + " to join round " + std::to_string(round) +
            " (" + std::to_string(joined) + " of " + std::to_string(o_.nnodes) + " joined) after " +
            seconds_str(now - t0) + " of " + seconds_str(o_.rdzv_timeout) + " (store at " +
            where() + ")");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // Every machine must run the same job shape.
    std::string mine = shape(), diff;
    for (int k = 0; k < o_.nnodes; ++k) {
      const std::string other =
          call([&] { return store_->get_string(base + "node/" + std::to_string(k)); });
      if (other != mine) diff += "; node " + std::to_string(k) + ": " + other;
    }
    if (!diff.empty())
      fail_fatal(round, "the machines were started with different launch options (node " + me +
                            ": " + mine + diff + ")");
  }

  // One look at `round` (from the watcher thread, every few hundred ms):
  // beats this machine's liveness and reads the published failure, if any.
  // An unreachable store: nothing yet (unreachable_for() says how long); a
  // store whose server went away: throws StoreLostError.
  std::optional<Failure> poll(int round) {
    try {
      store_->add(key(round, "alive/" + std::to_string(o_.node_rank)), 1);
      auto f = published(round);
      std::lock_guard<std::mutex> lock(state_mu_);
      last_ok_ = Clock::now();
      failing_ = false;
      return f;
    } catch (const StoreLostError&) {
      throw;
    } catch (const Error& e) {
      std::lock_guard<std::mutex> lock(state_mu_);
      if (!failing_) next_unreachable_log_ = last_ok_ + o_.wait_log_interval;
      failing_ = true;
      last_store_error_ = e.what();
      return std::nullopt;
    }
  }
  // How long the store has not answered (zero while it answers).
  Clock::duration unreachable_for() const {
    std::lock_guard<std::mutex> lock(state_mu_);
    return failing_ ? Clock::now() - last_ok_ : Clock::duration::zero();
  }
  // A wait line while the store does not answer, every wait_log_interval.
  void report_unreachable() {
    std::string error;
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      if (!failing_ || o_.wait_log_interval.count() == 0 || Clock::now() < next_unreachable_log_)
        return;
      next_unreachable_log_ += o_.wait_log_interval;
      error = last_store_error_;
    }
    say("the job's store at " + where() + " has not answered for " +
        seconds_str(unreachable_for()) + " of " + seconds_str(o_.rdzv_timeout) +
        " (the link to the first machine down, or it stopped?); the ranks keep running until "
        "their network.timeout (last error: " +
        error + ")");
  }

  // Publishes this machine's failure; the first published makes every
  // machine stop. Best effort: an unreachable store is reported, not thrown.
  void publish(int round, Failure f) {
    f.time_ms = wall_ms();
    f.node = o_.node_rank;
    if (unreachable_for() > Clock::duration::zero()) {
      say("cannot tell the other machines: the job's store at " + where() +
          " does not answer; they stop at their own timeout");
      return;
    }
    try {
      const std::string base = key(round, "");
      store_->set(base + "failure/" + std::to_string(o_.node_rank), f.encode());
      if (store_->add(base + "nfailed", 1) == 1) store_->set(base + "failed", f.encode());
    } catch (const std::exception& e) {
      say(std::string("could not tell the other machines through the job's store: ") + e.what());
    }
  }

  // The earliest failure any machine published for `round` (by wall clock).
  std::optional<Failure> first_failure(int round) {
    std::optional<Failure> first;
    if (unreachable_for() > Clock::duration::zero()) return first;
    try {
      for (int k = 0; k < o_.nnodes; ++k) {
        const std::string key_k = key(round, "failure/" + std::to_string(k));
        if (!store_->check({key_k})) continue;
        const Failure f = Failure::decode(store_->get_string(key_k));
        if (!first || f.time_ms < first->time_ms) first = f;
      }
    } catch (const std::exception&) {
    }
    return first;
  }

  // This machine's ranks all succeeded: waits for the round's outcome, every
  // machine done (nothing returned) or a failure elsewhere (returned, so that
  // this machine restarts with the others or stops with them).
  std::optional<Failure> finish(int round) {
    const std::string me = std::to_string(o_.node_rank);
    try {
      call([&] {
        store_->set(key(round, "done/" + me), "1");
        return 0;
      });
      const auto t0 = Clock::now();
      auto next_log = t0 + o_.wait_log_interval;
      for (;;) {
        call([&] { return store_->add(key(round, "alive/" + me), 1); });
        if (auto f = published(round)) {
          acknowledge(round);
          return f;
        }
        std::string left;
        for (int k = 0; k < o_.nnodes; ++k)
          if (!store_->check({key(round, "done/" + std::to_string(k))}))
            left += (left.empty() ? "node " : ", node ") + std::to_string(k);
        if (left.empty()) {
          acknowledge(round);
          return std::nullopt;
        }
        const auto now = Clock::now();
        if (now - t0 >= o_.rdzv_timeout) {
          Failure f;
          f.node = o_.node_rank;
          f.fatal = true;
          f.what =
              left + " did not finish within " + seconds_str(now - t0) + " of this machine's ranks";
          publish(round, f);
          return f;
        }
        if (o_.wait_log_interval.count() > 0 && now >= next_log) {
          next_log += o_.wait_log_interval;
          say("the local ranks finished; waiting for " + left + " (" + seconds_str(now - t0) +
              " of " + seconds_str(o_.rdzv_timeout) + ")");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    } catch (const std::exception& e) {
      Failure f;
      f.node = o_.node_rank;
      f.fatal = true;
      f.what =
          std::string("the job's store did not answer after the local ranks finished: ") + e.what();
      return f;
    }
  }

  // This machine knows that `round` failed (its own failure or another's).
  void acknowledge(int round) {
    if (unreachable_for() > Clock::duration::zero()) return;
    try {
      store_->set(key(round, "seen/" + std::to_string(o_.node_rank)), "1");
    } catch (const std::exception&) {
    }
  }

  // The first machine, about to exit after a round: keeps the store up until
  // every machine has seen how it ended, so that each names a failure (or
  // ends in success) instead of reporting a lost store. A machine whose tcv-run stopped beating
  // (gone, or cut off) is not waited for; nor is any for more than a few seconds.
  void linger(int round) {
    if (o_.node_rank != 0 || o_.nnodes == 1) return;
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::min(o_.rdzv_timeout, std::chrono::milliseconds(10000));
    const auto quiet = std::chrono::milliseconds(1000);
    std::vector<std::string> beat(static_cast<size_t>(o_.nnodes));
    std::vector<Clock::time_point> changed(static_cast<size_t>(o_.nnodes), t0);
    try {
      for (;;) {
        const auto now = Clock::now();
        bool waiting = false;
        for (int k = 1; k < o_.nnodes; ++k) {
          if (store_->check({key(round, "seen/" + std::to_string(k))})) continue;
          const std::string alive = key(round, "alive/" + std::to_string(k));
          const std::string v = store_->check({alive}) ? store_->get_string(alive) : "";
          if (v != beat[static_cast<size_t>(k)]) {
            beat[static_cast<size_t>(k)] = v;
            changed[static_cast<size_t>(k)] = now;
          }
          waiting |= now - changed[static_cast<size_t>(k)] < quiet;
        }
        if (!waiting || now >= deadline) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    } catch (const std::exception&) {
    }
  }

  // A round that failed before its ranks started (the failure says why).
  struct RoundFailed : Error {
    explicit RoundFailed(Failure f) : Error(f.what), failure(std::move(f)) {}
    Failure failure;
  };

 private:
  std::string key(int round, const std::string& rest) const {
    return "/tcv-run/" + std::to_string(round) + "/" + rest;
  }

  // The launch options every machine must share.
  std::string shape() const {
    return "--nnodes " + std::to_string(o_.nnodes) + " --nproc-per-node " +
           std::to_string(o_.nproc_per_node) + " --max-restarts " + std::to_string(o_.max_restarts);
  }

  std::optional<Failure> published(int round) {
    const std::string k = key(round, "failed");
    if (!store_->check({k})) return std::nullopt;
    return Failure::decode(store_->get_string(k));
  }

  std::string missing_nodes(int round) {
    std::string out;
    int n = 0;
    for (int k = 0; k < o_.nnodes; ++k) {
      bool there = false;
      try {
        there = store_->check({key(round, "node/" + std::to_string(k))});
      } catch (const std::exception&) {
      }
      if (!there) {
        if (n++ < 8) out += (out.empty() ? "" : ", ") + std::to_string(k);
      }
    }
    if (n > 8) out += ", ...";
    return (n == 1 ? "node " : "nodes ") + out;
  }

  [[noreturn]] void fail_fatal(int round, const std::string& what) {
    Failure f;
    f.fatal = true;
    f.exit_code = 1;
    f.what = what;
    publish(round, f);
    f.node = o_.node_rank;
    throw RoundFailed(f);
  }

  // Retries a store call that timed out until the rendezvous timeout.
  template <typename F>
  auto call(F&& f) -> decltype(f()) {
    const auto deadline = Clock::now() + o_.rdzv_timeout;
    for (;;) {
      try {
        return f();
      } catch (const StoreTimeoutError&) {
        if (Clock::now() >= deadline) throw;
      }
    }
  }

  LaunchOptions o_;
  std::string label_;
  std::unique_ptr<TcpStore> store_;  // thread-safe: the watcher and the main thread share it
  mutable std::mutex state_mu_;      // guards what follows
  Clock::time_point last_ok_ = Clock::now();
  bool failing_ = false;
  Clock::time_point next_unreachable_log_{};
  std::string last_store_error_;
};

struct GroupResult {
  int exit_code = 0;               // of the first rank that failed; 0 when all succeeded
  bool interrupted = false;        // SIGINT/SIGTERM reached the launcher
  bool fatal = false;              // no restart: interrupted, or the store is gone
  std::optional<Failure> failure;  // what this machine saw first (its own or another's)
};

// How a rank ended, as a phrase: "exited with code 3", "was killed by signal 9 (Killed)".
std::string ending(int st) {
  if (WIFEXITED(st)) return "exited with code " + std::to_string(WEXITSTATUS(st));
  return "was killed by signal " + std::to_string(WTERMSIG(st)) + " (" + strsignal(WTERMSIG(st)) +
         ")";
}

// One start of every local rank, until all have exited. `o.master_port` is resolved.
GroupResult run_group(const LaunchOptions& o, int round, Agent& agent) {
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string visible = cvd ? cvd : "";
  std::vector<Rank> ranks(static_cast<size_t>(o.nproc_per_node));

  // Everything the children need, built before fork (only async-signal-safe calls after it).
  std::vector<std::vector<std::string>> envs(static_cast<size_t>(o.nproc_per_node));
  for (int l = 0; l < o.nproc_per_node; ++l) {
    Rank& r = ranks[static_cast<size_t>(l)];
    char path[] = "/tmp/tcv-run-errorXXXXXX";
    const int fd = ::mkstemp(path);
    if (fd >= 0) {
      ::close(fd);
      r.error_file = path;
    }
    EnvMap extra = rank_env(o, l, visible, round);
    if (!r.error_file.empty()) extra["TCV_ERROR_FILE"] = r.error_file;
    if (o.launcher_fd >= 0) extra["TCV_LAUNCHER_FD"] = std::to_string(o.launcher_fd);
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

  std::vector<std::thread> pumps;
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t launcher = ::getpid();
  for (int l = 0; l < o.nproc_per_node; ++l) {
    Rank& r = ranks[static_cast<size_t>(l)];
    r.local = l;
    r.global = o.node_rank * o.nproc_per_node + l;
    // Quiet or not, each machine's first local rank speaks: its wait lines
    // and errors are that machine's.
    const bool silence = o.quiet_others && r.local != 0;
    const bool pipe_it = r.global != 0 && !silence;
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
      pumps.emplace_back(pump, out_pipe[0], 1, prefix, std::ref(out_mutex()));
      pumps.emplace_back(pump, err_pipe[0], 2, prefix, std::ref(out_mutex()));
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
  // "rank 3 (pid 42)" on one machine; "rank 3 (local rank 1, pid 42)" on several.
  auto rank_name = [&](const Rank& r) {
    return "rank " + std::to_string(r.global) + " (" +
           (o.nnodes > 1 ? "local rank " + std::to_string(r.local) + ", " : "") + "pid " +
           std::to_string(r.pid) + ")";
  };
  const bool several = o.nnodes > 1;
  // The watcher: looks at the job's store every few hundred ms on a thread of
  // its own, so that a store that does not answer never delays the handling
  // of the local ranks.
  struct Watch {
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;
    std::optional<Failure> found;  // another machine's failure, or the store's loss
  } watch;
  std::thread watcher;
  if (several)
    watcher = std::thread([&] {
      std::unique_lock<std::mutex> lock(watch.mu);
      while (!watch.stop) {
        lock.unlock();
        std::optional<Failure> f;
        try {
          f = agent.poll(round);
          if (f) {
            agent.acknowledge(round);
          } else if (agent.unreachable_for() >= o.rdzv_timeout) {
            f = Failure{};
            f->node = o.node_rank;
            f->fatal = true;
            f->what = "the job's store at " + agent.where() + " did not answer for " +
                      seconds_str(agent.unreachable_for());
          } else {
            agent.report_unreachable();
          }
        } catch (const StoreLostError& e) {
          f = Failure{};
          f->node = o.node_rank;
          f->fatal = true;
          f->what = std::string(
                        "lost the job's store (the first machine's tcv-run exited or was "
                        "killed): ") +
                    e.what();
        }
        lock.lock();
        if (f) {
          watch.found = f;
          return;
        }
        watch.cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return watch.stop; });
      }
    });
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
        const std::string why = read_error_file(r.error_file);
        Failure f;
        f.node = o.node_rank;
        f.exit_code = r.status;
        f.what = rank_name(r) + " " + ending(st) + (why.empty() ? "" : ": " + why);
        agent.say(f.what + (several ? "; stopping the local ranks and telling the other machines"
                                    : "; stopping the other ranks"));
        stop_all(SIGTERM);
        if (several) {
          agent.publish(round, f);
          agent.acknowledge(round);
        }
        result.failure = f;
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
        result.fatal = true;
        if (several) {
          Failure f;
          f.exit_code = 128 + sig;
          f.fatal = true;
          f.what = std::string("tcv-run was interrupted by signal ") + std::to_string(sig) + " (" +
                   strsignal(sig) + ")";
          agent.publish(round, f);
          agent.acknowledge(round);
        }
      }
    }
    // Another machine's failure, or the store's loss, stops the local ranks.
    if (several && !stopping) {
      std::optional<Failure> remote;
      {
        std::lock_guard<std::mutex> lock(watch.mu);
        remote = watch.found;
      }
      if (remote) {
        agent.say(remote->node == o.node_rank
                      ? remote->what + "; stopping the local ranks"
                      : "node " + std::to_string(remote->node) + " reports: " + remote->what +
                            "; stopping the local ranks");
        stop_all(SIGTERM);
        result.exit_code = remote->exit_code;
        result.fatal = remote->fatal;
        result.failure = remote;
      }
    }
    if (stopping && !killed && Clock::now() > kill_at) {
      killed = true;
      signal_all(SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (watcher.joinable()) {
    {
      std::lock_guard<std::mutex> lock(watch.mu);
      watch.stop = true;
    }
    watch.cv.notify_all();
    watcher.join();
  }
  for (auto& t : pumps) t.join();
  for (const Rank& r : ranks)
    if (!r.error_file.empty()) ::unlink(r.error_file.c_str());
  return result;
}

}  // namespace

int launch(LaunchOptions o) {
  if (o.master_port == 0) o.master_port = o.nnodes == 1 ? pick_free_port() : 29500;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  struct Restore {
    struct sigaction a, b;
    ~Restore() {
      sigaction(SIGINT, &a, nullptr);
      sigaction(SIGTERM, &b, nullptr);
    }
  } restore{old_int, old_term};

  // The ranks watch the read end (inherited through exec, whatever runs in
  // between); only this process holds the write end, so its death, even by
  // SIGKILL, is an end-of-file there (watch_launcher()).
  int life[2] = {-1, -1};
  if (::pipe2(life, O_CLOEXEC) == 0) {
    ::fcntl(life[0], F_SETFD, 0);
    o.launcher_fd = life[0];
  }
  struct ClosePipe {
    int* fds;
    ~ClosePipe() {
      for (int i = 0; i < 2; ++i)
        if (fds[i] >= 0) ::close(fds[i]);
    }
  } close_pipe{life};

  std::unique_ptr<Agent> agent;
  const std::string label =
      o.nnodes == 1 ? "tcv-run" : "tcv-run (node " + std::to_string(o.node_rank) + ")";
  try {
    agent = std::make_unique<Agent>(o);
  } catch (const std::exception& e) {
    const std::string line = label + ": " + e.what() + "\n";
    write_all(2, line.data(), line.size());
    return 1;
  }
  int code = 0;
  for (int round = 0;; ++round) {
    if (round > 0)
      agent->say(
          "restart " + std::to_string(round) + " of " + std::to_string(o.max_restarts) +
          ": starting all " + std::to_string(o.nproc_per_node) + " local rank(s) again" +
          (o.nnodes > 1 ? " once all " + std::to_string(o.nnodes) + " machines have joined" : "") +
          " (rendezvous on " + agent->where() + ")");
    GroupResult g;
    try {
      agent->join(round);
      g = run_group(o, round, *agent);
    } catch (const Agent::RoundFailed& e) {
      const Failure& f = e.failure;
      agent->acknowledge(round);
      agent->say(f.node == o.node_rank || f.node < 0
                     ? f.what
                     : "node " + std::to_string(f.node) + " reports: " + f.what);
      g.exit_code = f.exit_code;
      g.fatal = f.fatal;
      g.failure = f;
    } catch (const std::exception& e) {
      agent->say(e.what());
      g.exit_code = 1;
      g.fatal = true;
    }
    if (g.exit_code == 0) {
      code = 0;
      if (o.nnodes == 1) break;
      const std::optional<Failure> f = agent->finish(round);
      if (!f) {
        agent->linger(round);
        break;
      }
      // Another machine failed: this one restarts (or stops) with it.
      agent->say("the local ranks finished, but " +
                 (f->node == o.node_rank
                      ? f->what
                      : "node " + std::to_string(f->node) + " reports: " + f->what));
      g.exit_code = f->exit_code;
      g.fatal = f->fatal;
      g.failure = f;
    }
    code = g.exit_code;
    if (g.interrupted || g.fatal || g_signal != 0) {
      agent->linger(round);
      break;
    }
    if (round >= o.max_restarts) {
      std::string first;
      if (o.nnodes > 1) {
        std::optional<Failure> f = agent->first_failure(round);
        if (!f) f = g.failure;
        if (f) first = "; the first failure: node " + std::to_string(f->node) + ": " + f->what;
      }
      if (o.max_restarts > 0 || !first.empty())
        agent->say("no restarts left (" + std::to_string(o.max_restarts) +
                   " used); exiting with code " + std::to_string(code) + first);
      agent->linger(round);
      break;
    }
  }
  return code;
}

void watch_launcher() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* v = std::getenv("TCV_LAUNCHER_FD");
    if (!v || !*v) return;
    int fd = -1;
    const auto [p, ec] = std::from_chars(v, v + std::strlen(v), fd);
    if (ec != std::errc() || *p != '\0' || fd < 0 || ::fcntl(fd, F_GETFD) < 0) return;
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // not for this process's own children
    std::thread([fd] {
      for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, -1) < 0 && errno == EINTR) continue;
        char c;
        const ssize_t n = ::read(fd, &c, 1);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n != 0) return;  // not tcv-run's pipe after all
        break;
      }
      const char* rank = std::getenv("RANK");
      log_line(std::string("rank ") + (rank ? rank : "?") +
               ": tcv-run, which started it, is gone; stopping (with its process group)");
      ::kill(0, SIGKILL);
    }).detach();
  });
}

}  // namespace tcv::dist
