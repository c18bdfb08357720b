// The Gloo backend: CPU tensors over TCP. Gloo's algorithms block, so each
// group runs its collectives on one worker thread, in issue order; the caller
// gets a Work at once and overlaps its own compute with the transfer.
//
// A lost peer surfaces in Gloo as a closed connection (at once, on the ranks
// connected to it) or as a timeout (on the others). Gloo names addresses, not
// ranks, so every rank also ticks a heartbeat key in the store; on a failure
// the ranks whose heartbeat stopped are named in the error.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "dist/process_group.h"
#include "engine/error.h"

namespace tcv::dist {

namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Gloo's rendezvous store on top of our TcpStore, every key under `prefix/`.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  StoreAdapter(TcpStore& store, std::string prefix, milliseconds timeout)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + "/" + key, Bytes(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const Bytes b = store_.get(prefix_ + "/" + key, timeout_);
    return std::vector<char>(b.begin(), b.end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const milliseconds& timeout) override {
    std::vector<std::string> prefixed;
    prefixed.reserve(keys.size());
    for (const auto& k : keys) prefixed.push_back(prefix_ + "/" + k);
    store_.wait(prefixed, timeout);
  }

 private:
  TcpStore& store_;
  std::string prefix_;
  milliseconds timeout_;
};

// ---- element-wise reductions, one per (dtype, op) ----------------------------

using ReduceFn = gloo::AllreduceOptions::Func;

template <typename T, typename Acc, typename F>
ReduceFn make_reduce(F f) {
  return [f](void* out, const void* a, const void* b, size_t n) {
    auto* o = static_cast<T*>(out);
    const auto* x = static_cast<const T*>(a);
    const auto* y = static_cast<const T*>(b);
    for (size_t i = 0; i < n; ++i)
      o[i] = static_cast<T>(f(static_cast<Acc>(x[i]), static_cast<Acc>(y[i])));
  };
}

template <typename T, typename Acc>
ReduceFn reduce_for(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return make_reduce<T, Acc>([](Acc a, Acc b) { return a + b; });
    case ReduceOp::max:
      return make_reduce<T, Acc>([](Acc a, Acc b) { return a < b ? b : a; });
    case ReduceOp::min:
      return make_reduce<T, Acc>([](Acc a, Acc b) { return b < a ? b : a; });
  }
  return {};
}

ReduceFn reduce_fn(DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::f32:
      return reduce_for<float, float>(op);
    case DType::f64:
      return reduce_for<double, double>(op);
    case DType::f16:
      return reduce_for<Half, float>(op);
    case DType::bf16:
      return reduce_for<BFloat16, float>(op);
    case DType::i32:
      return reduce_for<int32_t, int32_t>(op);
    case DType::i64:
      return reduce_for<int64_t, int64_t>(op);
    default:
      TCV_THROW("[gloo] reductions support f32, f64, f16, bf16, i32, i64; got ", dtype_name(dtype));
  }
}

// avg: the sum divided by the group size, in the tensor's own type (integers truncate).
template <typename T, typename Acc>
void divide_as(void* data, size_t n, int size) {
  auto* p = static_cast<T*>(data);
  const Acc d = static_cast<Acc>(size);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<Acc>(p[i]) / d);
}

void divide(void* data, size_t n, DType dtype, int size) {
  switch (dtype) {
    case DType::f32:
      return divide_as<float, float>(data, n, size);
    case DType::f64:
      return divide_as<double, double>(data, n, size);
    case DType::f16:
      return divide_as<Half, float>(data, n, size);
    case DType::bf16:
      return divide_as<BFloat16, float>(data, n, size);
    case DType::i32:
      return divide_as<int32_t, int32_t>(data, n, size);
    case DType::i64:
      return divide_as<int64_t, int64_t>(data, n, size);
    default:
      break;
  }
}

// Runs Gloo's allreduce on raw bytes; the element type only fixes its size.
void gloo_allreduce(const std::shared_ptr<gloo::Context>& ctx, void* data, size_t n, DType dtype,
                    ReduceOp op, uint32_t tag, milliseconds timeout) {
  gloo::AllreduceOptions opts(ctx);
  auto buf = ctx->createUnboundBuffer(data, n * dtype_size(dtype));
  switch (dtype_size(dtype)) {
    case 2:
      opts.setOutput<uint16_t>(std::move(buf));
      break;
    case 4:
      opts.setOutput<uint32_t>(std::move(buf));
      break;
    default:
      opts.setOutput<uint64_t>(std::move(buf));
      break;
  }
  opts.setReduceFunction(reduce_fn(dtype, op));
  static const char* algo = std::getenv("TCV_GLOO_ALGO");
  static const char* seg = std::getenv("TCV_GLOO_SEGMENT");
  opts.setAlgorithm(algo && std::string(algo) == "bcube" ? gloo::AllreduceOptions::Algorithm::BCUBE
                                                         : gloo::AllreduceOptions::Algorithm::RING);
  if (seg) opts.setMaxSegmentSize(std::strtoull(seg, nullptr, 10));
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::allreduce(opts);
  if (op == ReduceOp::avg) divide(data, n, dtype, ctx->size);
}

// ---- small messages: Gloo's halving-doubling, built once per buffer ----------
//
// The new-style ring all-reduce above costs a few thread hand-offs per segment,
// which dominates below a few MiB; halving-doubling on preregistered buffers
// has fewer steps. Its buffers bind to one pointer, so instances are cached per
// (count, dtype, op) with a staging buffer; every rank builds them in the same
// issue order.

template <typename T, typename Acc>
struct HdFns {
  static void sum(T* x, const T* y, size_t n) {
    for (size_t i = 0; i < n; ++i)
      x[i] = static_cast<T>(static_cast<Acc>(x[i]) + static_cast<Acc>(y[i]));
  }
  static void max(T* x, const T* y, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (static_cast<Acc>(x[i]) < static_cast<Acc>(y[i])) x[i] = y[i];
  }
  static void min(T* x, const T* y, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (static_cast<Acc>(y[i]) < static_cast<Acc>(x[i])) x[i] = y[i];
  }
};

template <typename T, typename Acc>
std::unique_ptr<gloo::Algorithm> make_hd_as(const std::shared_ptr<gloo::Context>& ctx, void* data,
                                            size_t n, ReduceOp op) {
  static const gloo::ReductionFunction<T> sum_fn(gloo::SUM, &HdFns<T, Acc>::sum);
  static const gloo::ReductionFunction<T> max_fn(gloo::MAX, &HdFns<T, Acc>::max);
  static const gloo::ReductionFunction<T> min_fn(gloo::MIN, &HdFns<T, Acc>::min);
  const gloo::ReductionFunction<T>* fn = op == ReduceOp::max   ? &max_fn
                                         : op == ReduceOp::min ? &min_fn
                                                               : &sum_fn;
  return std::make_unique<gloo::AllreduceHalvingDoubling<T>>(
      ctx, std::vector<T*>{static_cast<T*>(data)}, static_cast<int>(n), fn);
}

std::unique_ptr<gloo::Algorithm> make_hd(const std::shared_ptr<gloo::Context>& ctx, void* data,
                                         size_t n, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::f32:
      return make_hd_as<float, float>(ctx, data, n, op);
    case DType::f64:
      return make_hd_as<double, double>(ctx, data, n, op);
    case DType::f16:
      return make_hd_as<Half, float>(ctx, data, n, op);
    case DType::bf16:
      return make_hd_as<BFloat16, float>(ctx, data, n, op);
    case DType::i32:
      return make_hd_as<int32_t, int32_t>(ctx, data, n, op);
    case DType::i64:
      return make_hd_as<int64_t, int64_t>(ctx, data, n, op);
    default:
      TCV_THROW("[gloo] reductions support f32, f64, f16, bf16, i32, i64; got ", dtype_name(dtype));
  }
}

// All-reduces of at most this many bytes take the cached halving-doubling path.
size_t small_allreduce_bytes() {
  static const size_t v = [] {
    const char* e = std::getenv("TCV_GLOO_SMALL_BYTES");
    return e ? static_cast<size_t>(std::strtoull(e, nullptr, 10)) : size_t{2} << 20;
  }();
  return v;
}

// Below this the ring is as quick, and tiny counts leave halving-doubling with
// empty blocks.
constexpr size_t kMinHdBytes = 64 << 10;

class HdCache {
 public:
  // Runs the all-reduce of `data` through a cached instance. Instances are
  // keyed by (count, dtype, op), never by address (addresses differ between
  // ranks, hits must not), and work on their own staging buffer.
  void run(const std::shared_ptr<gloo::Context>& ctx, void* data, size_t n, DType dtype,
           ReduceOp op) {
    const ReduceOp kind = op == ReduceOp::avg ? ReduceOp::sum : op;
    Entry* hit = nullptr;
    for (auto& e : entries_)
      if (e.n == n && e.dtype == dtype && e.op == kind) hit = &e;
    if (!hit) {
      if (entries_.size() >= kMaxEntries) entries_.pop_front();  // same order on every rank
      Entry e{n, dtype, kind, std::vector<uint64_t>((n * dtype_size(dtype) + 7) / 8), nullptr};
      e.algo = make_hd(ctx, e.staging.data(), n, dtype, kind);
      entries_.push_back(std::move(e));
      hit = &entries_.back();
    }
    const size_t nbytes = n * dtype_size(dtype);
    std::memcpy(hit->staging.data(), data, nbytes);
    hit->algo->run();
    std::memcpy(data, hit->staging.data(), nbytes);
  }

 private:
  static constexpr size_t kMaxEntries = 32;
  struct Entry {
    size_t n;
    DType dtype;
    ReduceOp op;
    std::vector<uint64_t> staging;
    std::unique_ptr<gloo::Algorithm> algo;
  };
  std::deque<Entry> entries_;
};

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// The address Gloo binds: the option, else 127.0.0.1 for a local job, else the
// host's name when it resolves.
std::string pick_hostname(const ProcessGroupOptions& options, const std::string& master) {
  if (!options.gloo_hostname.empty()) return options.gloo_hostname;
  if (const char* env = std::getenv("TCV_GLOO_HOSTNAME"); env && *env) return env;
  if (is_loopback(master)) return "127.0.0.1";
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0') {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(name, nullptr, &hints, &res) == 0) {
      freeaddrinfo(res);
      return name;
    }
  }
  return "127.0.0.1";
}

// Groups made with the same prefix on one store get distinct key spaces; every
// rank makes its groups in the same order, so the counters agree.
std::string unique_prefix(const std::string& prefix) {
  static std::mutex mu;
  static std::map<std::string, int> counts;
  std::lock_guard<std::mutex> lock(mu);
  return prefix + "/" + std::to_string(counts[prefix]++);
}

class GlooWork : public Work {
 public:
  void finish(std::string error) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      error_ = std::move(error);
    }
    cv_.notify_all();
  }
  void wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    if (!error_.empty()) throw Error(error_);
  }
  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_;
};

constexpr milliseconds kHeartbeatPeriod{200};

class GlooGroup : public ProcessGroup {
 public:
  GlooGroup(std::shared_ptr<TcpStore> store, int rank, int size, ProcessGroupOptions options,
            const std::string& prefix)
      : ProcessGroup(rank, size),
        store_(std::move(store)),
        options_(std::move(options)),
        prefix_(unique_prefix(prefix)) {
    TCV_CHECK(store_ != nullptr, "[gloo] make_gloo_group needs a store");
    TCV_CHECK(size >= 1 && rank >= 0 && rank < size, "[gloo] rank ", rank,
              " out of range for group size ", size);
    const std::string host = pick_hostname(options_, store_->host());
    try {
      gloo::transport::tcp::attr attr;
      attr.hostname = host;
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
      ctx->setTimeout(options_.timeout);
      StoreAdapter adapter(*store_, prefix_, options_.timeout);
      ctx->connectFullMesh(adapter, device);
      ctx_ = ctx;
    } catch (const std::exception& e) {
      TCV_THROW("[gloo] rank ", rank, " of ", size, " could not connect to its peers (bound to ",
                host, ", store ", store_->host(), ":", store_->port(), ", keys '", prefix_,
                "/'): ", e.what());
    }
    if (size > 1) {
      TcpStoreOptions so;
      so.world_size = size;
      so.timeout = std::min(options_.timeout, milliseconds(10000));
      hb_store_ = std::make_unique<TcpStore>(store_->host(), store_->port(), so);
      hb_thread_ = std::thread([this] { heartbeat(); });
    }
    worker_ = std::thread([this] { run(); });
  }

  ~GlooGroup() override {
    std::deque<Task> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      dropped.swap(queue_);
    }
    cv_.notify_all();
    cv_hb_.notify_all();
    for (auto& t : dropped)
      t.work->finish("[gloo] process group destroyed before the collective ran");
    if (worker_.joinable()) worker_.join();
    if (hb_thread_.joinable()) hb_thread_.join();
  }

  std::string backend_name() const override { return "gloo"; }

  WorkPtr all_reduce(const Tensor& t, ReduceOp op) override {
    check_tensor(t, "all_reduce");
    reduce_fn(t.dtype(), op);  // throws for unsupported dtypes at the call site
    const std::string what = describe("all_reduce", t, op);
    return enqueue(what, [this, t, op](uint32_t tag) {
      const size_t n = static_cast<size_t>(t.numel());
      if (size() > 1 && t.nbytes() >= kMinHdBytes && t.nbytes() <= small_allreduce_bytes()) {
        hd_cache_.run(ctx_, t.data_ptr(), n, t.dtype(), op);
        if (op == ReduceOp::avg) divide(t.data_ptr(), n, t.dtype(), size());
        return;
      }
      gloo_allreduce(ctx_, t.data_ptr(), n, t.dtype(), op, tag, options_.timeout);
    });
  }

  WorkPtr broadcast(const Tensor& t, int root) override {
    check_tensor(t, "broadcast");
    TCV_CHECK(root >= 0 && root < size(), "[gloo] broadcast root ", root,
              " out of range for group size ", size());
    const std::string what = describe("broadcast", t) + " from rank " + std::to_string(root);
    return enqueue(what, [this, t, root](uint32_t tag) {
      gloo::BroadcastOptions opts(ctx_);
      opts.setOutput<uint8_t>(static_cast<uint8_t*>(t.data_ptr()), t.nbytes());
      opts.setRoot(root);
      opts.setTag(tag);
      opts.setTimeout(options_.timeout);
      gloo::broadcast(opts);
    });
  }

  WorkPtr all_gather(const Tensor& out, const Tensor& in) override {
    check_tensor(out, "all_gather");
    check_tensor(in, "all_gather");
    TCV_CHECK(out.dtype() == in.dtype(), "[gloo] all_gather: out is ", dtype_name(out.dtype()),
              ", in is ", dtype_name(in.dtype()));
    TCV_CHECK(out.numel() == in.numel() * size(), "[gloo] all_gather: out has ", out.numel(),
              " elements, expected size() * in.numel() = ", size(), " * ", in.numel());
    const std::string what = describe("all_gather", in);
    return enqueue(what, [this, out, in](uint32_t tag) {
      gloo::AllgatherOptions opts(ctx_);
      opts.setInput<uint8_t>(static_cast<uint8_t*>(in.data_ptr()), in.nbytes());
      opts.setOutput<uint8_t>(static_cast<uint8_t*>(out.data_ptr()), out.nbytes());
      opts.setTag(tag);
      opts.setTimeout(options_.timeout);
      gloo::allgather(opts);
    });
  }

  WorkPtr reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) override {
    check_tensor(out, "reduce_scatter");
    check_tensor(in, "reduce_scatter");
    reduce_fn(in.dtype(), op);
    TCV_CHECK(out.dtype() == in.dtype(), "[gloo] reduce_scatter: out is ", dtype_name(out.dtype()),
              ", in is ", dtype_name(in.dtype()));
    TCV_CHECK(in.numel() == out.numel() * size(), "[gloo] reduce_scatter: in has ", in.numel(),
              " elements, expected size() * out.numel() = ", size(), " * ", out.numel());
    const std::string what = describe("reduce_scatter", in, op);
    return enqueue(what, [this, out, in, op](uint32_t tag) {
      // All-reduce a copy, keep this rank's slice: `in` stays untouched.
      std::vector<uint8_t> tmp(in.nbytes());
      if (!tmp.empty()) std::memcpy(tmp.data(), in.data_ptr(), tmp.size());
      gloo_allreduce(ctx_, tmp.data(), static_cast<size_t>(in.numel()), in.dtype(), op, tag,
                     options_.timeout);
      std::memcpy(out.data_ptr(), tmp.data() + static_cast<size_t>(rank()) * out.nbytes(),
                  out.nbytes());
    });
  }

  WorkPtr barrier() override {
    return enqueue("barrier", [this](uint32_t tag) {
      gloo::BarrierOptions opts(ctx_);
      opts.setTag(tag);
      opts.setTimeout(options_.timeout);
      gloo::barrier(opts);
    });
  }

 private:
  struct Task {
    std::string what;
    std::function<void(uint32_t)> fn;
    std::shared_ptr<GlooWork> work;
  };

  void check_tensor(const Tensor& t, const char* op) const {
    TCV_CHECK(t.defined(), "[gloo] ", op, ": undefined tensor");
    TCV_CHECK(t.device().is_cpu(), "[gloo] ", op, ": the Gloo backend takes CPU tensors, got a ",
              t.device().str(), " tensor (use the NCCL backend for CUDA tensors)");
    TCV_CHECK(t.is_contiguous(), "[gloo] ", op, ": the tensor ", t.shape_str(),
              " must be contiguous");
  }

  std::string describe(const char* op, const Tensor& t) const {
    return detail::str_cat(op, " (", dtype_name(t.dtype()), ", ", t.numel(), " elements)");
  }
  std::string describe(const char* op, const Tensor& t, ReduceOp rop) const {
    return detail::str_cat(op, " ", reduce_op_name(rop), " (", dtype_name(t.dtype()), ", ",
                           t.numel(), " elements)");
  }

  WorkPtr enqueue(std::string what, std::function<void(uint32_t)> fn) {
    auto work = std::make_shared<GlooWork>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      TCV_CHECK(!stop_, "[gloo] ", what, " issued on a process group being destroyed");
      queue_.push_back(Task{std::move(what), std::move(fn), work});
    }
    cv_.notify_one();
    return work;
  }

  void run() {
    uint32_t tag = 0;
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      if (!broken_.empty()) {
        task.work->finish("[gloo] " + task.what + " on rank " + std::to_string(rank()) +
                          ": the process group failed earlier: " + broken_);
        continue;
      }
      std::string error;
      try {
        task.fn(tag++);
      } catch (const std::exception& e) {
        error = e.what();
      }
      if (!error.empty()) {
        broken_ = "[gloo] " + task.what + " failed on rank " + std::to_string(rank()) + " of " +
                  std::to_string(size()) + lost_ranks() + ": " + error;
        task.work->finish(broken_);
      } else {
        task.work->finish("");
      }
    }
  }

  void heartbeat() {
    const std::string key = prefix_ + "/hb/" + std::to_string(rank());
    int64_t beat = 0;
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      try {
        hb_store_->set(key, std::to_string(++beat));
      } catch (const std::exception&) {
        return;  // the store is gone; lost_ranks() reports it
      }
      lock.lock();
      cv_hb_.wait_for(lock, kHeartbeatPeriod, [&] { return stop_; });
    }
  }

  // Which peers stopped beating: read every heartbeat twice, a few periods apart.
  std::string lost_ranks() {
    if (!hb_store_) return "";
    auto read = [&](std::vector<std::string>& v) {
      for (int r = 0; r < size(); ++r) {
        if (r == rank()) continue;
        const std::string k = prefix_ + "/hb/" + std::to_string(r);
        v[r] = hb_store_->check({k}) ? hb_store_->get_string(k) : "";
      }
    };
    std::vector<std::string> a(size()), b(size());
    try {
      read(a);
      std::this_thread::sleep_for(kHeartbeatPeriod * 4);
      read(b);
    } catch (const std::exception&) {
      return " (lost rank 0: its store at " + store_->host() + ":" +
             std::to_string(store_->port()) + " is unreachable)";
    }
    std::string lost;
    for (int r = 0; r < size(); ++r) {
      if (r == rank() || a[r] != b[r]) continue;
      lost += (lost.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r);
    }
    if (lost.empty()) return "";
    return " (lost " + lost + ": no heartbeat for " +
           std::to_string((kHeartbeatPeriod * 4).count()) + " ms)";
  }

  std::shared_ptr<TcpStore> store_;
  ProcessGroupOptions options_;
  std::string prefix_;
  std::shared_ptr<gloo::Context> ctx_;
  std::unique_ptr<TcpStore> hb_store_;
  HdCache hd_cache_;  // worker thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable cv_hb_;
  std::deque<Task> queue_;
  bool stop_ = false;
  std::string broken_;  // worker thread only
  std::thread worker_;
  std::thread hb_thread_;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_gloo_group(std::shared_ptr<TcpStore> store, int rank, int size,
                                              ProcessGroupOptions options,
                                              const std::string& prefix) {
  return std::make_shared<GlooGroup>(std::move(store), rank, size, std::move(options), prefix);
}

}  // namespace tcv::dist
