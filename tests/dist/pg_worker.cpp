// One rank of a multi-process ProcessGroup test (started by
// test_process_group.cpp through fork+exec, with RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT set; the test process hosts the store).
//
//   pg_worker collectives        closed-form checks of every collective
//   pg_worker async              two all_reduces in flight, then wait both
//   pg_worker kill VICTIM [N]    VICTIM dies (SIGKILL) mid-collective (all_reduces
//                                of N floats); the others print the error and exit 3
//   pg_worker loop               all_reduces until one fails (the test stops a rank
//                                with SIGSTOP); prints the error and exits 3
//   pg_worker mismatch AT N M    AT matching all_reduces of N floats, then rank 1
//                                all_reduces M floats where the others take N;
//                                prints the error and exits 3
//   pg_worker join               makes a group and prints "JOINED" (the test starts
//                                fewer ranks than WORLD_SIZE)
//   pg_worker sigpipe [own]      writes to a socket whose peer closed, as Gloo's
//                                writev() does when a rank dies; prints how the
//                                write ended ("own" installs a SIGPIPE handler
//                                before the group is made)
//
// The rendezvous is read as tcv-train reads it (RANK/WORLD_SIZE or Slurm's
// variables); TCV_DIST_TIMEOUT and TCV_DIST_WAIT_LOG_INTERVAL override the
// time limits.
//
// Prints "FAIL ..." lines for wrong results and exits 1; exit 0 when all passed.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "dist/env.h"
#include "dist/process_group.h"
#include "engine/tensor.h"

using namespace tcv;
using namespace tcv::dist;
using Clock = std::chrono::steady_clock;

namespace {

int g_failures = 0;

void fail(const std::string& msg) {
  if (g_failures++ < 20) std::printf("FAIL %s\n", msg.c_str());
}

// t[i] = f(i), written in f64 and converted to t's dtype (the values here are
// small integers, exact in every dtype).
template <typename F>
void fill_with(Tensor t, F f) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = f(static_cast<int64_t>(i));
  t.copy_(from_vector(v, t.shape()).to(t.dtype()));
}

// t's elements in f64.
std::vector<double> values(const Tensor& t) {
  return t.to(DType::f64).to_vector<double>();
}

// Rank r contributes (r + 1) * (i % 7 + 1): small integers, exact in every dtype.
double pattern(int r, int64_t i) {
  return static_cast<double>((r + 1) * (i % 7 + 1));
}

double expected(ReduceOp op, DType dt, int n, int64_t i) {
  const double base = static_cast<double>(i % 7 + 1);
  switch (op) {
    case ReduceOp::sum:
      return base * n * (n + 1) / 2;
    case ReduceOp::max:
      return base * n;
    case ReduceOp::min:
      return base;
    case ReduceOp::avg: {
      const double sum = base * n * (n + 1) / 2;
      if (dt == DType::i32 || dt == DType::i64) return std::trunc(sum / n);
      return sum / n;
    }
  }
  return 0;
}

void check_all_reduce(ProcessGroup& pg, DType dt, int64_t n, ReduceOp op) {
  Tensor t = empty({n}, {.dtype = dt});
  fill_with(t, [&](int64_t i) { return pattern(pg.rank(), i); });
  pg.all_reduce(t, op)->wait();
  const std::vector<double> got = values(t);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double want = expected(op, dt, pg.size(), i);
    if (std::fabs(got[i] - want) > 1e-6 * std::fabs(want)) {
      if (wrong++ == 0)
        fail(detail::str_cat("all_reduce ", reduce_op_name(op), " ", dtype_name(dt), " n=", n, " [",
                             i, "] = ", got[i], ", want ", want));
    }
  }
}

void run_collectives(ProcessGroup& pg) {
  const int r = pg.rank();
  const int w = pg.size();
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64})
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{1} << 20})
      check_all_reduce(pg, dt, n, ReduceOp::sum);
  // 1000 elements take the ring, 100000 (200 KiB - 800 KiB) the halving-doubling path.
  for (int64_t n : {int64_t{1000}, int64_t{100000}})
    for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::i64})
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min})
        check_all_reduce(pg, dt, n, op);

  // broadcast from the last rank (non-zero)
  const int root = w - 1;
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{1} << 20}) {
    Tensor t = zeros({n}, {.dtype = DType::f32});
    if (r == root) fill_with(t, [](int64_t i) { return 100 + i % 1000; });
    pg.broadcast(t, root)->wait();
    const std::vector<double> got = values(t);
    for (int64_t i = 0; i < n; ++i)
      if (got[i] != 100 + i % 1000) {
        fail(detail::str_cat("broadcast n=", n, " [", i, "] = ", got[i]));
        break;
      }
  }

  // all_gather: rank r's in = r * 1000 + i
  for (int64_t n : {int64_t{1}, int64_t{1000}}) {
    Tensor in = empty({n}, {.dtype = DType::i64});
    fill_with(in, [&](int64_t i) { return r * 1000 + i; });
    Tensor out = zeros({n * w}, {.dtype = DType::i64});
    pg.all_gather(out, in)->wait();
    const std::vector<double> got = values(out);
    for (int q = 0; q < w; ++q)
      for (int64_t i = 0; i < n; ++i)
        if (got[q * n + i] != q * 1000 + i) {
          fail(detail::str_cat("all_gather n=", n, " out[", q * n + i, "] = ", got[q * n + i]));
          q = w;
          break;
        }
  }

  // reduce_scatter: in[j] = (r + 1) * (j + 1); out[i] = sum_q (q + 1) * (r * n + i + 1)
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
    const int64_t n = 1000;
    Tensor in = empty({n * w}, {.dtype = DType::f64});
    fill_with(in, [&](int64_t j) { return (r + 1) * (j + 1); });
    Tensor out = zeros({n}, {.dtype = DType::f64});
    pg.reduce_scatter(out, in, op)->wait();
    const std::vector<double> got = values(out);
    const double ranks = w * (w + 1) / 2.0;
    for (int64_t i = 0; i < n; ++i) {
      double want = ranks * static_cast<double>(r * n + i + 1);
      if (op == ReduceOp::avg) want /= w;
      if (got[i] != want) {
        fail(detail::str_cat("reduce_scatter ", reduce_op_name(op), " out[", i, "] = ", got[i],
                             ", want ", want));
        break;
      }
    }
    if (values(in)[0] != r + 1) fail("reduce_scatter modified its input");
  }

  for (int i = 0; i < 3; ++i) pg.barrier()->wait();

  // errors at the call site
  try {
    pg.all_reduce(empty({4}, {.dtype = DType::u8}));
    fail("all_reduce of u8 did not throw");
  } catch (const Error&) {
  }
}

void run_async(ProcessGroup& pg) {
  const int64_t n = 1 << 20;
  Tensor a = empty({n}, {.dtype = DType::f32});
  Tensor b = empty({n}, {.dtype = DType::f32});
  fill_with(a, [&](int64_t i) { return pattern(pg.rank(), i); });
  fill_with(b, [&](int64_t i) { return 2 * pattern(pg.rank(), i); });
  WorkPtr wa = pg.all_reduce(a);
  WorkPtr wb = pg.all_reduce(b, ReduceOp::max);
  wb->wait();
  wa->wait();
  if (!wa->is_completed() || !wb->is_completed()) fail("is_completed() false after wait()");
  const std::vector<double> va = values(a), vb = values(b);
  for (int64_t i = 0; i < n; ++i) {
    if (va[i] != expected(ReduceOp::sum, DType::f32, pg.size(), i)) {
      fail(detail::str_cat("async a[", i, "] = ", va[i]));
      break;
    }
    if (vb[i] != 2 * expected(ReduceOp::max, DType::f32, pg.size(), i)) {
      fail(detail::str_cat("async b[", i, "] = ", vb[i]));
      break;
    }
  }
}

// Prints the error of a failed collective with the seconds since t0; exit code 3.
int report_error(const Error& e, Clock::time_point t0) {
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("ERROR after %.2f s: %s\n", s, e.what());
  std::fflush(stdout);
  return 3;
}

int run_loop(ProcessGroup& pg) {
  Tensor t = zeros({1000}, {.dtype = DType::f32});
  auto t0 = Clock::now();
  try {
    for (int i = 0;; ++i) {
      t0 = Clock::now();
      pg.all_reduce(t)->wait();
      if (i == 20) {
        std::printf("LOOPING\n");
        std::fflush(stdout);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } catch (const Error& e) {
    return report_error(e, t0);
  }
}

int run_mismatch(ProcessGroup& pg, int at, int64_t n, int64_t m) {
  Tensor same = zeros({n}, {.dtype = DType::f32});
  Tensor other = zeros({pg.rank() == 1 ? m : n}, {.dtype = DType::f32});
  const auto t0 = Clock::now();
  try {
    for (int i = 0; i < at; ++i) pg.all_reduce(same)->wait();
    pg.all_reduce(other)->wait();
    std::printf("NO ERROR\n");
    return 1;
  } catch (const Error& e) {
    return report_error(e, t0);
  }
}

int run_kill(ProcessGroup& pg, int victim, int64_t count) {
  pg.barrier()->wait();
  if (pg.rank() == victim) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::fflush(stdout);
    kill(getpid(), SIGKILL);
  }
  // The survivors are inside this all_reduce when the victim dies.
  Tensor t = zeros({count}, {.dtype = DType::f32});
  const auto t0 = Clock::now();
  try {
    for (int i = 0; i < 1000; ++i) pg.all_reduce(t)->wait();
    std::printf("NO ERROR\n");
    return 1;
  } catch (const Error& e) {
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("ERROR after %.2f s: %s\n", s, e.what());
    std::fflush(stdout);
    // Later collectives fail at once with the same cause.
    try {
      pg.barrier()->wait();
      std::printf("NO SECOND ERROR\n");
    } catch (const Error& e2) {
      std::printf("SECOND ERROR: %s\n", e2.what());
    }
    std::fflush(stdout);
    // Stay alive a moment so peers diagnosing their own failure see our heartbeat.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return 3;
  }
}

volatile sig_atomic_t g_sigpipes = 0;

void count_sigpipe(int) {
  g_sigpipes = g_sigpipes + 1;
}

// A write to a socket whose other end is closed: killed by SIGPIPE unless the
// group left it ignored (or the program's own handler in place).
int run_sigpipe() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 2;
  close(fds[1]);
  const char byte = 0;
  const ssize_t n = write(fds[0], &byte, 1);
  const int err = errno;
  close(fds[0]);
  std::printf("write returned %zd (%s), %d SIGPIPE handled\n", n, n < 0 ? std::strerror(err) : "-",
              static_cast<int>(g_sigpipes));
  std::fflush(stdout);
  return n < 0 && err == EPIPE ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: pg_worker collectives|async|kill|loop|mismatch|join|sigpipe ...\n");
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "sigpipe" && argc > 2 && std::string(argv[2]) == "own") {
    struct sigaction sa {};
    sa.sa_handler = count_sigpipe;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, nullptr);
  }
  try {
    const DistEnv env = read_dist_env();
    DistTimeouts limits;
    limits.timeout = mode == "kill" ? std::chrono::milliseconds(3000) : std::chrono::seconds(20);
    limits = timeouts_from_env(process_dist_env(), limits);
    TcpStoreOptions so;
    so.world_size = env.world_size;
    so.rank = env.rank;
    so.timeout = limits.timeout;
    so.wait_log_interval = limits.wait_log_interval;
    auto store = std::make_shared<TcpStore>(env.master_addr, env.master_port, so);
    ProcessGroupOptions po;
    po.timeout = limits.timeout;
    po.wait_log_interval = limits.wait_log_interval;
    const auto t0 = Clock::now();
    std::shared_ptr<ProcessGroup> pg;
    try {
      pg = make_gloo_group(store, env.rank, env.world_size, po);
    } catch (const Error& e) {
      return report_error(e, t0);
    }
    if (mode == "join") {
      std::printf("JOINED\n");
    } else if (mode == "loop") {
      return run_loop(*pg);
    } else if (mode == "mismatch") {
      if (argc < 5) return 2;
      return run_mismatch(*pg, std::atoi(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]));
    } else if (mode == "collectives") {
      run_collectives(*pg);
    } else if (mode == "async") {
      run_async(*pg);
    } else if (mode == "sigpipe") {
      return run_sigpipe();
    } else if (mode == "kill") {
      return run_kill(*pg, argc > 2 ? std::atoi(argv[2]) : 1,
                      argc > 3 ? std::atoll(argv[3]) : 1 << 22);
    } else {
      std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::printf("FAIL exception: %s\n", e.what());
    return 1;
  }
  std::printf(g_failures ? "FAILED\n" : "PASSED\n");
  return g_failures ? 1 : 0;
}
