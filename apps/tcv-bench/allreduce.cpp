#include "apps/tcv-bench/allreduce.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

#include "apps/cli.h"
#include "dist/env.h"
#include "dist/process_group.h"
#include "engine/cuda.h"
#include "engine/json.h"

namespace tcv::bench {

const char* const kAllreduceUsage =
    "allreduce: all-reduce bandwidth over a size sweep (like nccl-tests all_reduce_perf);\n"
    "run under tcv-run for several ranks (one process works without it).\n"
    "  --backend nccl|gloo    process group (gloo: CPU tensors; nccl: cuda:LOCAL_RANK)\n"
    "  -b, --minbytes SIZE    smallest size (32M); SIZE takes K, M, G suffixes\n"
    "  -e, --maxbytes SIZE    largest size (32M)\n"
    "  -f, --stepfactor F     multiply the size by F each step (2)\n"
    "  -n, --iters N          timed all-reduces per size (20)\n"
    "  -w, --warmup_iters W   untimed all-reduces first (5)\n"
    "  -c, --check 0|1        verify the result on known values, count wrong elements (1)\n"
    "  -d, --datatype T       float, half, bfloat16 or double (float)\n"
    "  --op sum|avg           reduction (sum)\n"
    "  --json                 one JSON object per row instead of the table\n"
    "busbw = algbw * 2(n-1)/n, as nccl-tests reports it. Every rank must be given the same\n"
    "arguments (they are compared at start-up). TCV_DIST_TIMEOUT (seconds, 300) limits each\n"
    "collective; TCV_DIST_WAIT_LOG_INTERVAL (seconds, 30) is how often a waiting rank says\n"
    "what it waits for.\n";

namespace {

using apps::UsageError;
using Clock = std::chrono::steady_clock;

using apps::parse_int;

const char* type_name(DType t) {
  switch (t) {
    case DType::f32:
      return "float";
    case DType::f16:
      return "half";
    case DType::bf16:
      return "bfloat16";
    case DType::f64:
      return "double";
    default:
      return dtype_name(t);
  }
}

// Rank r's value at position i: small integers, so sums and averages are exact
// in every type.
double fill_value(int rank, int64_t i) {
  return static_cast<double>((rank + 1) * (i % 13 + 1));
}

double expected_value(int world, int64_t i, bool avg) {
  const double s = static_cast<double>((i % 13 + 1) * world * (world + 1) / 2);
  return avg ? s / world : s;
}

// Rank `rank`'s contribution, written in f64 and converted to t's dtype.
void fill(Tensor t, int rank) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = fill_value(rank, static_cast<int64_t>(i));
  t.copy_(from_vector(v, t.shape()).to(t.dtype()));
}

int64_t count_wrong(const Tensor& t, int world, bool avg) {
  const std::vector<double> got = t.to(DType::f64).to_vector<double>();
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double want = expected_value(world, static_cast<int64_t>(i), avg);
    if (std::fabs(got[i] - want) > 1e-3 * std::fabs(want)) ++wrong;
  }
  return wrong;
}

}  // namespace

int64_t parse_bytes(const std::string& flag, const std::string& text) {
  if (text.empty()) throw UsageError{flag + " expects a size like 8, 1K, 16M, 1G"};
  int64_t mult = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K':
    case 'k':
      mult = int64_t{1} << 10;
      break;
    case 'M':
    case 'm':
      mult = int64_t{1} << 20;
      break;
    case 'G':
    case 'g':
      mult = int64_t{1} << 30;
      break;
    default:
      break;
  }
  if (mult != 1) digits.pop_back();
  // A size past int64 (99999999999G) wrapped around and surfaced as "maxbytes
  // must be at least minbytes": name the overflow instead.
  const int64_t most = std::numeric_limits<int64_t>::max() / mult;
  const auto too_large = [&] {
    return UsageError{flag + " " + text + " does not fit in 64 bits: at most " +
                      std::to_string(most) + (mult == 1 ? "" : std::string(1, text.back()))};
  };
  int64_t n = 0;
  try {
    n = parse_int(flag, digits, 1);
  } catch (const UsageError&) {
    if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos)
      throw too_large();
    throw UsageError{flag + " expects a size like 8, 1K, 16M, 1G, got '" + text + "'"};
  }
  if (n > most) throw too_large();
  return n * mult;
}

AllreduceOptions parse_allreduce_args(const std::vector<std::string>& args) {
  AllreduceOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    std::string inline_value;
    bool has_inline = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      inline_value = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));
      has_inline = true;
    }
    auto value = [&]() -> std::string {
      if (has_inline) return inline_value;
      if (i + 1 >= args.size()) throw UsageError{a + " needs a value"};
      return args[++i];
    };
    if (a == "--backend") {
      o.backend = value();
      if (o.backend != "nccl" && o.backend != "gloo")
        throw UsageError{"--backend expects nccl or gloo, got '" + o.backend + "'"};
    } else if (a == "-b" || a == "--minbytes") {
      o.min_bytes = parse_bytes(a, value());
    } else if (a == "-e" || a == "--maxbytes") {
      o.max_bytes = parse_bytes(a, value());
    } else if (a == "-f" || a == "--stepfactor") {
      o.step_factor = parse_int(a, value(), 2);
    } else if (a == "-n" || a == "--iters") {
      o.iters = parse_int(a, value(), 1);
    } else if (a == "-w" || a == "--warmup_iters") {
      o.warmup = parse_int(a, value(), 0);
    } else if (a == "-c" || a == "--check") {
      const std::string v = value();
      if (v != "0" && v != "1") throw UsageError{a + " expects 0 or 1, got '" + v + "'"};
      o.check = v == "1";
    } else if (a == "-d" || a == "--datatype") {
      const std::string v = value();
      if (v == "float" || v == "f32" || v == "float32")
        o.dtype = DType::f32;
      else if (v == "half" || v == "f16" || v == "float16")
        o.dtype = DType::f16;
      else if (v == "bfloat16" || v == "bf16")
        o.dtype = DType::bf16;
      else if (v == "double" || v == "f64" || v == "float64")
        o.dtype = DType::f64;
      else
        throw UsageError{a + " expects float, half, bfloat16 or double, got '" + v + "'"};
    } else if (a == "--op") {
      o.op = value();
      if (o.op != "sum" && o.op != "avg")
        throw UsageError{"--op expects sum or avg, got '" + o.op + "'"};
    } else if (a == "--json") {
      o.json = true;
    } else {
      throw UsageError{"allreduce: unknown argument '" + args[i] + "'"};
    }
  }
  if (o.max_bytes < o.min_bytes) throw UsageError{"-e/--maxbytes must be at least -b/--minbytes"};
  const auto esize = static_cast<int64_t>(dtype_size(o.dtype));
  if (o.min_bytes < esize)
    throw UsageError{"-b/--minbytes " + std::to_string(o.min_bytes) +
                     " is smaller than one element of " + type_name(o.dtype) + " (" +
                     std::to_string(esize) +
                     " bytes): sizes are in bytes, and that row would "
                     "all-reduce nothing; use -b " +
                     std::to_string(esize) + " or more"};
  return o;
}

namespace {

// The arguments that decide which collectives a rank issues, written back as flags.
std::string canonical_args(const AllreduceOptions& o) {
  return detail::str_cat("--backend ", o.backend, " -b ", o.min_bytes, " -e ", o.max_bytes, " -f ",
                         o.step_factor, " -n ", o.iters, " -w ", o.warmup, " -c ", o.check ? 1 : 0,
                         " -d ", type_name(o.dtype), " --op ", o.op);
}

// Every rank publishes its arguments in the store and compares them with the
// others', so ranks given different sizes fail at once with a message instead
// of mismatched collectives.
void check_same_args(dist::TcpStore& store, int rank, int world, const AllreduceOptions& o,
                     std::chrono::milliseconds timeout) {
  if (world == 1) return;
  const std::string mine = canonical_args(o);
  store.set("tcv-bench/allreduce/args/" + std::to_string(rank), mine);
  std::string differ;
  for (int r = 0; r < world; ++r) {
    if (r == rank) continue;
    const dist::Bytes b = store.get("tcv-bench/allreduce/args/" + std::to_string(r), timeout,
                                    "rank " + std::to_string(r) + "'s arguments");
    const std::string theirs(b.begin(), b.end());
    if (theirs != mine) differ += detail::str_cat("; rank ", r, ": ", theirs);
  }
  TCV_CHECK(differ.empty(),
            "[tcv-bench allreduce] ranks were given different arguments (every "
            "rank must run the same sizes): rank ",
            rank, ": ", mine, differ);
}

}  // namespace

int run_allreduce_bench(const AllreduceOptions& opts) {
  namespace cu = cuda;
  dist::DistEnv env;
  const bool launched = dist::has_dist_env(dist::process_dist_env());
  if (launched) env = dist::read_dist_env();
  const dist::DistTimeouts timeouts = dist::timeouts_from_env(dist::process_dist_env());
  dist::TcpStoreOptions so;
  so.timeout = timeouts.timeout;
  so.wait_log_interval = timeouts.wait_log_interval;
  if (!launched) env.master_port = 0;  // one process: its own store on a free port
  auto store = dist::connect_job_store(env, so);
  check_same_args(*store, env.rank, env.world_size, opts, timeouts.timeout);
  dist::ProcessGroupOptions po;
  po.timeout = timeouts.timeout;
  po.wait_log_interval = timeouts.wait_log_interval;

  const bool nccl = opts.backend == "nccl";
  Device device = kCPU;
  std::shared_ptr<dist::ProcessGroup> pg;
  if (nccl) {
    const int n = cu::device_count();
    TCV_CHECK(n > 0, "[tcv-bench allreduce] --backend nccl needs a CUDA device; rank ", env.rank,
              " sees none");
    device = Device(DeviceType::CUDA, env.local_rank % n);
    cu::set_device(device.index);
    pg = dist::make_nccl_group(store, env.rank, env.world_size, po);
  } else {
    pg = dist::make_gloo_group(store, env.rank, env.world_size, po);
  }
  const int world = pg->size();
  const bool avg = opts.op == "avg";
  const dist::ReduceOp op = avg ? dist::ReduceOp::avg : dist::ReduceOp::sum;
  const bool print = env.rank == 0;
  const size_t esize = dtype_size(opts.dtype);

  if (print && !opts.json) {
    std::printf(
        "# tcv-bench allreduce: backend %s, %d rank(s), %s %s, iters %lld, warmup %lld, "
        "check %d\n#\n",
        opts.backend.c_str(), world, type_name(opts.dtype), opts.op.c_str(),
        static_cast<long long>(opts.iters), static_cast<long long>(opts.warmup),
        opts.check ? 1 : 0);
    std::printf("# %12s %12s %9s %6s %11s %8s %8s %7s\n", "size", "count", "type", "redop", "time",
                "algbw", "busbw", "#wrong");
    std::printf("# %12s %12s %9s %6s %11s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)",
                "(GB/s)", "(GB/s)", "");
    std::fflush(stdout);
  }

  auto sync = [&] {
    if (nccl) cu::stream_synchronize(cu::compute_stream());
  };
  double busbw_sum = 0;
  int rows = 0;
  int64_t total_wrong = 0;
  for (int64_t bytes = opts.min_bytes; bytes <= opts.max_bytes; bytes *= opts.step_factor) {
    const int64_t count = bytes / static_cast<int64_t>(esize);
    if (count == 0) continue;
    Tensor host = zeros({count}, {.dtype = opts.dtype});
    Tensor buf = nccl ? host.to(device) : host;
    for (int64_t i = 0; i < opts.warmup; ++i) pg->all_reduce(buf, op)->wait();
    sync();
    pg->barrier()->wait();
    const auto t0 = Clock::now();
    std::vector<dist::WorkPtr> works;
    works.reserve(static_cast<size_t>(opts.iters));
    for (int64_t i = 0; i < opts.iters; ++i) works.push_back(pg->all_reduce(buf, op));
    for (auto& w : works) w->wait();
    sync();
    const double sec =
        std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(opts.iters);
    int64_t wrong = -1;
    if (opts.check) {
      fill(host, env.rank);
      if (nccl) buf = host.to(device);
      pg->all_reduce(buf, op)->wait();
      sync();
      const Tensor result = nccl ? buf.to(kCPU) : buf;
      wrong = count_wrong(result, world, avg);
      if (!nccl) {  // everyone's count, summed
        Tensor w = full({1}, static_cast<double>(wrong), {.dtype = DType::i64});
        pg->all_reduce(w)->wait();
        wrong = static_cast<int64_t>(w.item());
      }
      total_wrong += wrong;
    }
    const bool last = opts.max_bytes / opts.step_factor < bytes;  // no overflow past the end
    const double algbw = static_cast<double>(bytes) / sec / 1e9;
    const double busbw = algbw * 2.0 * (world - 1) / world;
    busbw_sum += busbw;
    ++rows;
    if (!print) {
      if (last) break;
      continue;
    }
    if (opts.json) {
      Json j = Json::object();
      j["backend"] = opts.backend;
      j["ranks"] = world;
      j["size"] = bytes;
      j["count"] = count;
      j["type"] = std::string(type_name(opts.dtype));
      j["redop"] = opts.op;
      j["time_us"] = sec * 1e6;
      j["algbw"] = algbw;
      j["busbw"] = busbw;
      j["wrong"] = wrong;
      std::printf("%s\n", json_dump(j).c_str());
    } else {
      std::printf("  %12lld %12lld %9s %6s %11.1f %8.3f %8.3f %7s\n", static_cast<long long>(bytes),
                  static_cast<long long>(count), type_name(opts.dtype), opts.op.c_str(), sec * 1e6,
                  algbw, busbw, opts.check ? std::to_string(wrong).c_str() : "N/A");
    }
    std::fflush(stdout);
    if (last) break;
  }
  const double avg_busbw = rows ? busbw_sum / rows : 0.0;
  if (print) {
    if (opts.json) {
      Json j = Json::object();
      j["avg_busbw"] = avg_busbw;
      j["wrong"] = total_wrong;
      std::printf("%s\n", json_dump(j).c_str());
    } else {
      std::printf("# Out of bounds values : %lld %s\n# Avg bus bandwidth    : %.4f\n#\n",
                  static_cast<long long>(total_wrong), total_wrong ? "FAILED" : "OK", avg_busbw);
    }
    std::fflush(stdout);
  }
  pg->barrier()->wait();
  return total_wrong ? 1 : 0;
}

}  // namespace tcv::bench
