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
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "dist/fingerprint.h"
#include "dist/log.h"
#include "dist/net.h"
#include "dist/process_group.h"
#include "dist/shm_allreduce.h"
#include "engine/error.h"

namespace tcv::dist {

namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Gloo's rendezvous store on top of our TcpStore, every key under `prefix/`.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  StoreAdapter(TcpStore& store, std::string prefix, milliseconds timeout,
               std::atomic<bool>* in_store = nullptr)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout), in_store_(in_store) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + "/" + key, Bytes(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    InStore busy(in_store_);
    const Bytes b = store_.get(prefix_ + "/" + key, timeout_, waiting_for({key}));
    return std::vector<char>(b.begin(), b.end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const milliseconds& timeout) override {
    std::vector<std::string> prefixed;
    prefixed.reserve(keys.size());
    for (const auto& k : keys) prefixed.push_back(prefix_ + "/" + k);
    InStore busy(in_store_);
    store_.wait(prefixed, timeout, waiting_for(keys));
  }

 private:
  // Marks a blocking store call (whose own wait lines say what it waits for).
  struct InStore {
    explicit InStore(std::atomic<bool>* f) : f_(f) {
      if (f_) *f_ = true;
    }
    ~InStore() {
      if (f_) *f_ = false;
    }
    std::atomic<bool>* f_;
  };

  // Gloo's full-mesh rendezvous keys are "rank_<r>" and "<r>": rank r joining.
  std::string waiting_for(const std::vector<std::string>& keys) const {
    std::string ranks;
    for (std::string k : keys) {
      if (k.rfind("rank_", 0) == 0) k = k.substr(5);
      if (k.empty() || k.find_first_not_of("0123456789") != std::string::npos) return "";
      ranks += (ranks.empty() ? "rank " : ", rank ") + k;
    }
    return ranks + " to join the gloo group '" + prefix_ + "'";
  }

 private:
  TcpStore& store_;
  std::string prefix_;
  milliseconds timeout_;
  std::atomic<bool>* in_store_;
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

 public:
  // True when run() would reuse an instance (no new one is built).
  bool has(size_t n, DType dtype, ReduceOp op) const {
    const ReduceOp kind = op == ReduceOp::avg ? ReduceOp::sum : op;
    for (const auto& e : entries_)
      if (e.n == n && e.dtype == dtype && e.op == kind) return true;
    return false;
  }
};

// The address Gloo binds (dist/net.h), announced once per process by the
// machine's first local rank so every machine says what it chose and why.
BindChoice pick_bind_address(const ProcessGroupOptions& options, const std::string& master,
                             int rank, int size) {
  BindRequest req;
  req.explicit_host = options.gloo_hostname;
  req.master_addr = master;
  req.env = process_dist_env();
  BindChoice c = choose_bind_address(req, system_net_probe());
  static std::once_flag announced;
  const auto local = req.env.find("LOCAL_RANK");
  const bool first_local = local != req.env.end() ? local->second == "0" : rank == 0;
  if (size > 1 && first_local) std::call_once(announced, [&] { log_line(c.describe("gloo")); });
  return c;
}

// How a rank's machine is named in its peers' errors: its bound address, and
// the host name when that is what was bound.
std::string bound_host_label(const std::string& bound) {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || bound == name) return bound;
  return bound + ", host '" + std::string(name) + "'";
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
  // The first call decides the outcome (an abandoned collective is finished
  // twice: by abort(), then by the worker when Gloo returns).
  void finish(std::string error) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) return;
      done_ = true;
      error_ = std::move(error);
      finished_ = Clock::now();
    }
    cv_.notify_all();
  }
  void start() {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = Clock::now();
  }
  Clock::time_point started_at() override {
    std::lock_guard<std::mutex> lock(mu_);
    return started_;
  }
  Clock::time_point finished_at() override {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_;
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
  Clock::time_point started_{}, finished_{};
};

// Ranks whose collectives differ, found by comparing fingerprints.
class Mismatch : public Error {
 public:
  using Error::Error;
};

constexpr milliseconds kHeartbeatPeriod{200};
// Each heartbeat store call gives up after this (then the next beat retries):
// a store that does not answer (the link to its machine down, its host
// stopped) must not silence the wait lines or delay the diagnosis.
constexpr milliseconds kHeartbeatStoreTimeout{2000};
// A collective still blocked this long after the timeout is stopped by the
// heartbeat thread.
constexpr milliseconds kDeadlineGrace{500};
// A collective blocked this long makes the heartbeat thread look at the peers,
// then once per kProbePeriod; a peer whose heartbeat did not change for
// kSilent is reported as not answering.
constexpr milliseconds kProbeAfter{500};
constexpr milliseconds kProbePeriod{500};
constexpr milliseconds kSilent{1000};

// Gloo writes its sockets with writev(), which raises SIGPIPE when the peer
// has gone; by default that kills this rank before any error can name the
// peer it lost (a race: it happens when the write comes before Gloo's reader
// sees the connection close). Ignored, the write fails with EPIPE and the
// collective's error says which rank went, as Python's default does for
// PyTorch's ranks. A handler the program installed is left alone.
void ignore_sigpipe_unless_handled() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL) return;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, nullptr);
}

std::string seconds_str(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", std::chrono::duration<double>(d).count());
  return buf;
}

// What a rank's heartbeat key holds: "<beat> b <fingerprint words>" while it
// is in a collective, "<beat> i <collectives finished>" otherwise.
struct PeerState {
  bool valid = false;
  int64_t beat = 0;
  bool busy = false;
  detail::Fingerprint fp;  // busy: the collective; idle: fp.seq = collectives finished

  static PeerState parse(const std::string& text) {
    PeerState p;
    std::istringstream is(text);
    char state = 0;
    if (!(is >> p.beat >> state)) return p;
    if (state == 'b') {
      int64_t w[4];
      if (!(is >> w[0] >> w[1] >> w[2] >> w[3])) return p;
      p.fp = detail::Fingerprint::unpack(w);
      p.busy = true;
    } else {
      uint64_t done = 0;
      if (!(is >> done)) return p;
      p.fp.seq = done;
    }
    p.valid = true;
    return p;
  }
  static std::string format(int64_t beat, bool busy, const detail::Fingerprint& fp, uint64_t done) {
    std::ostringstream os;
    os << beat << (busy ? " b" : " i");
    if (!busy) os << " " << done;
    if (busy)
      for (int64_t w : fp.pack()) os << " " << w;
    return os.str();
  }
};

// Everything the collectives need, shared with the worker thread: a rank
// whose collective was abandoned (see abort()) leaves its worker blocked in
// Gloo until the timeout, and the group can be destroyed meanwhile.
class GlooCore : public std::enable_shared_from_this<GlooCore> {
 public:
  GlooCore(std::shared_ptr<TcpStore> store, int rank, int size, ProcessGroupOptions options,
           const std::string& prefix)
      : rank_(rank),
        size_(size),
        store_(std::move(store)),
        options_(std::move(options)),
        prefix_(unique_prefix(prefix)),
        checks_(detail::checked_collectives(options_.check_collectives)) {
    TCV_CHECK(store_ != nullptr, "[gloo] make_gloo_group needs a store");
    TCV_CHECK(size >= 1 && rank >= 0 && rank < size, "[gloo] rank ", rank,
              " out of range for group size ", size);
    TCV_CHECK(options_.timeout.count() > 0, "[gloo] the timeout must be positive");
    std::string host;
    try {
      host = pick_bind_address(options_, store_->host(), rank, size).address;
    } catch (const std::exception& e) {
      TCV_THROW("[gloo] rank ", rank, " of ", size, ": ", e.what());
    }
    if (size > 1) ignore_sigpipe_unless_handled();
    try {
      ctx_ = connect_mesh(host);
    } catch (const std::exception& e) {
      TCV_THROW("[gloo] rank ", rank, " of ", size, " could not connect to its peers (bound to ",
                host, ", store ", store_->host(), ":", store_->port(), ", keys '", prefix_,
                "/'): ", e.what());
    }
    if (size > 1) {
      // The heartbeat's own connection, with a short timeout: a store that
      // does not answer must not hold up the wait lines or the diagnosis.
      TcpStoreOptions so = store_->options();
      so.is_server = false;
      so.timeout = std::min(options_.timeout, kHeartbeatStoreTimeout);
      so.wait_log_interval = milliseconds(0);
      hb_store_ = std::make_unique<TcpStore>(store_->host(), store_->port(), so);
      tracks_.resize(static_cast<size_t>(size));
      peer_silent_.assign(static_cast<size_t>(size), Clock::duration::zero());
      // Every rank's machine, so that errors can name it.
      peer_hosts_.assign(static_cast<size_t>(size), "");
      store_->set(prefix_ + "/host/" + std::to_string(rank), bound_host_label(host));
      for (int r = 0; r < size; ++r)
        if (r != rank)
          peer_hosts_[static_cast<size_t>(r)] =
              store_->get_string(prefix_ + "/host/" + std::to_string(r));
    } else {
      peer_hosts_.assign(1, "");
    }
    setup_shm();
  }

  // Connects the full mesh on a thread of its own, so that this rank says
  // what it waits for and gives up at the timeout: Gloo waits up to five
  // timeouts for a pair to connect, silently. A connect that outlives the
  // timeout is left to Gloo's own (the process is about to fail anyway).
  std::shared_ptr<gloo::Context> connect_mesh(const std::string& host) {
    struct Shared {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      std::shared_ptr<gloo::Context> ctx;
      std::string error;
      std::atomic<bool> in_store{false};  // reading the peers' addresses (the store says why)
    };
    auto sh = std::make_shared<Shared>();
    const milliseconds timeout = options_.timeout;
    std::thread t(
        [sh, store = store_, host, prefix = prefix_, timeout, rank = rank_, size = size_] {
          std::shared_ptr<gloo::Context> ctx;
          std::string error;
          try {
            gloo::transport::tcp::attr attr;
            attr.hostname = host;
            auto device = gloo::transport::tcp::CreateDevice(attr);
            auto rctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
            rctx->setTimeout(timeout);
            StoreAdapter adapter(*store, prefix, timeout, &sh->in_store);
            rctx->connectFullMesh(adapter, device);
            ctx = rctx;
          } catch (const std::exception& e) {
            error = e.what();
            ctx.reset();
          }
          std::lock_guard<std::mutex> lock(sh->mu);
          sh->ctx = std::move(ctx);
          sh->error = std::move(error);
          sh->done = true;
          sh->cv.notify_all();
        });
    const auto t0 = Clock::now();
    // A little past the timeout, so that the store's own timeout (which names
    // the ranks that never joined) ends a wait for peers first.
    const auto deadline = t0 + timeout + std::max(kDeadlineGrace, milliseconds(1000));
    auto next_log = options_.wait_log_interval.count() > 0 ? t0 + options_.wait_log_interval
                                                           : Clock::time_point::max();
    std::unique_lock<std::mutex> lock(sh->mu);
    while (!sh->done) {
      sh->cv.wait_until(lock, std::min(deadline, next_log), [&] { return sh->done; });
      if (sh->done) break;
      const auto now = Clock::now();
      if (now >= deadline) {
        lock.unlock();
        t.detach();
        TCV_THROW("no connection to every peer within the timeout of ", seconds_str(timeout),
                  " (their addresses came from the store; a peer whose address this machine "
                  "cannot reach, or that stopped while connecting)");
      }
      if (now >= next_log) {
        next_log += options_.wait_log_interval;
        if (!sh->in_store)
          log_line("[gloo] rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                   " is still connecting to its peers after " + seconds_str(now - t0) + " of " +
                   seconds_str(timeout) + " (bound to " + host +
                   "; the peers' addresses came from the store at " + store_->host() + ":" +
                   std::to_string(store_->port()) + ")");
      }
    }
    lock.unlock();
    t.join();
    if (!sh->error.empty()) throw Error(sh->error);
    return sh->ctx;
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool uses_shared_memory() const { return shm_ != nullptr; }

  // Starts the worker (which keeps this core alive) and the heartbeat.
  void start() {
    if (hb_store_) hb_thread_ = std::thread([this] { heartbeat(); });
    worker_ = std::thread([self = shared_from_this()] { self->run(); });
  }

  // Stops the threads. A worker blocked in an abandoned collective is left to
  // time out on its own (it owns the core); any other is joined.
  void shutdown() {
    std::deque<Task> dropped;
    bool abandoned = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      dropped.swap(queue_);
      abandoned = busy_ && !abort_reason_.empty();
    }
    cv_.notify_all();
    cv_hb_.notify_all();
    for (auto& t : dropped)
      t.work->finish("[gloo] process group destroyed before the collective ran");
    if (hb_thread_.joinable()) hb_thread_.join();
    if (worker_.joinable()) {
      if (abandoned) {
        worker_.detach();
      } else {
        worker_.join();
      }
    }
  }

  WorkPtr all_reduce(const Tensor& t, ReduceOp op) {
    check_tensor(t, "all_reduce");
    reduce_fn(t.dtype(), op);  // throws for unsupported dtypes at the call site
    detail::Fingerprint fp = fingerprint(detail::CollectiveKind::all_reduce, t);
    fp.op = op;
    return enqueue(fp, [this, t, op](uint32_t tag) {
      const size_t n = static_cast<size_t>(t.numel());
      if (shm_) {
        shm_all_reduce(t, op);
        return;
      }
      if (uses_hd(t.nbytes())) {
        hd_cache_.run(ctx_, t.data_ptr(), n, t.dtype(), op);
        if (op == ReduceOp::avg) divide(t.data_ptr(), n, t.dtype(), size());
        return;
      }
      gloo_allreduce(ctx_, t.data_ptr(), n, t.dtype(), op, tag, options_.timeout);
    });
  }

  WorkPtr broadcast(const Tensor& t, int root) {
    check_tensor(t, "broadcast");
    TCV_CHECK(root >= 0 && root < size(), "[gloo] broadcast root ", root,
              " out of range for group size ", size());
    detail::Fingerprint fp = fingerprint(detail::CollectiveKind::broadcast, t);
    fp.root = root;
    return enqueue(fp, [this, t, root](uint32_t tag) {
      gloo::BroadcastOptions opts(ctx_);
      opts.setOutput<uint8_t>(static_cast<uint8_t*>(t.data_ptr()), t.nbytes());
      opts.setRoot(root);
      opts.setTag(tag);
      opts.setTimeout(options_.timeout);
      gloo::broadcast(opts);
    });
  }

  WorkPtr all_gather(const Tensor& out, const Tensor& in) {
    check_tensor(out, "all_gather");
    check_tensor(in, "all_gather");
    TCV_CHECK(out.dtype() == in.dtype(), "[gloo] all_gather: out is ", dtype_name(out.dtype()),
              ", in is ", dtype_name(in.dtype()));
    TCV_CHECK(out.numel() == in.numel() * size(), "[gloo] all_gather: out has ", out.numel(),
              " elements, expected size() * in.numel() = ", size(), " * ", in.numel());
    return enqueue(fingerprint(detail::CollectiveKind::all_gather, in),
                   [this, out, in](uint32_t tag) {
                     gloo::AllgatherOptions opts(ctx_);
                     opts.setInput<uint8_t>(static_cast<uint8_t*>(in.data_ptr()), in.nbytes());
                     opts.setOutput<uint8_t>(static_cast<uint8_t*>(out.data_ptr()), out.nbytes());
                     opts.setTag(tag);
                     opts.setTimeout(options_.timeout);
                     gloo::allgather(opts);
                   });
  }

  WorkPtr reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) {
    check_tensor(out, "reduce_scatter");
    check_tensor(in, "reduce_scatter");
    reduce_fn(in.dtype(), op);
    TCV_CHECK(out.dtype() == in.dtype(), "[gloo] reduce_scatter: out is ", dtype_name(out.dtype()),
              ", in is ", dtype_name(in.dtype()));
    TCV_CHECK(in.numel() == out.numel() * size(), "[gloo] reduce_scatter: in has ", in.numel(),
              " elements, expected size() * out.numel() = ", size(), " * ", out.numel());
    detail::Fingerprint fp = fingerprint(detail::CollectiveKind::reduce_scatter, in);
    fp.op = op;
    return enqueue(fp, [this, out, in, op](uint32_t tag) {
      // All-reduce a copy, keep this rank's slice: `in` stays untouched.
      std::vector<uint8_t> tmp(in.nbytes());
      if (!tmp.empty()) std::memcpy(tmp.data(), in.data_ptr(), tmp.size());
      gloo_allreduce(ctx_, tmp.data(), static_cast<size_t>(in.numel()), in.dtype(), op, tag,
                     options_.timeout);
      std::memcpy(out.data_ptr(), tmp.data() + static_cast<size_t>(rank()) * out.nbytes(),
                  out.nbytes());
    });
  }

  WorkPtr barrier() {
    return enqueue(detail::Fingerprint{}, [this](uint32_t tag) {
      gloo::BarrierOptions opts(ctx_);
      opts.setTag(tag);
      opts.setTimeout(options_.timeout);
      gloo::barrier(opts);
    });
  }

 private:
  struct Task {
    detail::Fingerprint fp;
    std::function<void(uint32_t)> fn;
    std::shared_ptr<GlooWork> work;
  };
  // What the heartbeat thread knows of a peer.
  struct Track {
    std::string value;               // its heartbeat key, as last read
    Clock::time_point first_seen{};  // first read
    Clock::time_point changed{};     // when a read last saw it change ({}: not yet)
    PeerState state;

    // How long the peer has been silent, as far as this rank can tell.
    Clock::duration silent(Clock::time_point now) const {
      return now - (changed != Clock::time_point{} ? changed : first_seen);
    }
  };

  void check_tensor(const Tensor& t, const char* op) const {
    TCV_CHECK(t.defined(), "[gloo] ", op, ": undefined tensor");
    TCV_CHECK(t.device().is_cpu(), "[gloo] ", op, ": the Gloo backend takes CPU tensors, got a ",
              t.device().str(), " tensor (use the NCCL backend for CUDA tensors)");
    TCV_CHECK(t.is_contiguous(), "[gloo] ", op, ": the tensor ", t.shape_str(),
              " must be contiguous");
  }

  static detail::Fingerprint fingerprint(detail::CollectiveKind kind, const Tensor& t) {
    detail::Fingerprint fp;
    fp.kind = kind;
    fp.dtype = t.dtype();
    fp.count = t.numel();
    return fp;
  }

  // Two ranks on one machine all-reduce through shared memory
  // (dist/shm_allreduce.h) unless TCV_GLOO_SHM=0. Only two: a sum of two
  // terms is the same in either order, so the results equal the TCP paths'
  // bit for bit and a run on one machine equals one on several; with more
  // ranks the reduction order would differ from the ring's. Decided together
  // over the fresh connections: same machine and namespaces (host_key), then
  // a region rank 0 made that every rank could map and read back.
  void setup_shm() {
    if (size() != 2) return;
    // Every rank takes part even when its own TCV_GLOO_SHM=0 says no (a key of
    // 0), so ranks configured differently agree on TCP instead of waiting.
    const char* env = std::getenv("TCV_GLOO_SHM");
    const bool wanted = !(env && std::string(env) == "0");
    uint32_t step = 0;
    auto tag = [&] { return detail::Fingerprint::check_tag(0x7fffff00u + step++); };
    auto all_gather = [&](int64_t mine) {
      std::vector<int64_t> all(static_cast<size_t>(size()));
      gloo::AllgatherOptions opts(ctx_);
      opts.setInput<int64_t>(&mine, 1);
      opts.setOutput<int64_t>(all.data(), all.size());
      opts.setTag(tag());
      opts.setTimeout(options_.timeout);
      gloo::allgather(opts);
      return all;
    };
    uint64_t key = 1469598103934665603ull;
    for (unsigned char c : detail::ShmAllreduce::host_key()) {
      key ^= c;
      key *= 1099511628211ull;
    }
    const auto keys = all_gather(wanted ? static_cast<int64_t>(key | 1) : 0);
    if (keys[0] == 0 ||
        std::any_of(keys.begin(), keys.end(), [&](int64_t k) { return k != keys[0]; }))
      return;
    // Rank 0 makes the region and sends its name's token (the name derives from it).
    std::vector<int64_t> token(1, 0);
    if (rank() == 0) {
      std::random_device rd;
      token[0] = static_cast<int64_t>(((uint64_t{rd()} << 32) ^ rd() ^ uint64_t(::getpid())) | 1);
    }
    auto name = [&] {
      char buf[48];
      std::snprintf(buf, sizeof(buf), "/tcv-gloo-%016llx",
                    static_cast<unsigned long long>(token[0]));
      return std::string(buf);
    };
    std::unique_ptr<detail::ShmAllreduce> shm;
    if (rank() == 0) {
      shm = detail::ShmAllreduce::create(name(), 0, size(), static_cast<uint64_t>(token[0]));
      if (!shm) token[0] = 0;
    }
    gloo::BroadcastOptions bo(ctx_);
    bo.setOutput<int64_t>(token.data(), 1);
    bo.setRoot(0);
    bo.setTag(tag());
    bo.setTimeout(options_.timeout);
    gloo::broadcast(bo);
    if (token[0] == 0) return;
    if (rank() != 0)
      shm = detail::ShmAllreduce::attach(name(), rank(), size(), static_cast<uint64_t>(token[0]));
    const auto ok = all_gather(shm ? 1 : 0);
    if (rank() == 0) detail::ShmAllreduce::unlink(name());
    if (std::all_of(ok.begin(), ok.end(), [](int64_t v) { return v == 1; })) shm_ = std::move(shm);
  }

  // The shared-memory all-reduce of the collective in flight (worker thread).
  void shm_all_reduce(const Tensor& t, ReduceOp op) {
    const size_t n = static_cast<size_t>(t.numel());
    detail::Fingerprint fp;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fp = current_;
    }
    try {
      shm_->all_reduce(fp.pack(), t.data_ptr(), n, dtype_size(t.dtype()), reduce_fn(t.dtype(), op),
                       options_.timeout, [this] {
                         std::lock_guard<std::mutex> lock(mu_);
                         return abort_reason_;
                       });
    } catch (const detail::ShmCallMismatch& m) {
      std::vector<detail::Fingerprint> fps;
      for (const auto& c : m.calls) fps.push_back(detail::Fingerprint::unpack(c.data()));
      throw Mismatch(detail::compare_fingerprints(fps, "gloo"));
    }
    if (op == ReduceOp::avg) divide(t.data_ptr(), n, t.dtype(), size());
  }

  // All-reduces of this many bytes take the cached halving-doubling path.
  bool uses_hd(size_t nbytes) const {
    return size() > 1 && nbytes >= kMinHdBytes && nbytes <= small_allreduce_bytes();
  }

  WorkPtr enqueue(const detail::Fingerprint& fp, std::function<void(uint32_t)> fn) {
    auto work = std::make_shared<GlooWork>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      TCV_CHECK(!stop_, "[gloo] ", fp.call_str(), " issued on a process group being destroyed");
      if (!abort_reason_.empty()) {  // the worker may still be blocked in the abandoned one
        work->finish("[gloo] " + fp.call_str() + " on rank " + std::to_string(rank()) +
                     ": the process group failed earlier: " + abort_reason_);
        return work;
      }
      queue_.push_back(Task{fp, std::move(fn), work});
    }
    cv_.notify_one();
    return work;
  }

  // Fingerprints are compared before data moves in the first collectives, in
  // every one under TCV_DISTRIBUTED_DEBUG=DETAIL, and before a new
  // halving-doubling instance is built (ranks must build the same ones).
  bool needs_check(const detail::Fingerprint& fp) const {
    if (size() == 1) return false;
    if (checks_ < 0 || fp.seq < static_cast<uint64_t>(checks_)) return true;
    const size_t nbytes = static_cast<size_t>(fp.count) * dtype_size(fp.dtype);
    return fp.kind == detail::CollectiveKind::all_reduce && uses_hd(nbytes) &&
           !hd_cache_.has(static_cast<size_t>(fp.count), fp.dtype, fp.op);
  }

  // All-gathers every rank's fingerprint (on a tag no data collective uses)
  // and throws Mismatch when they differ.
  void check_fingerprint(const detail::Fingerprint& fp) {
    const auto mine = fp.pack();
    std::vector<int64_t> all(mine.size() * static_cast<size_t>(size()));
    gloo::AllgatherOptions opts(ctx_);
    opts.setInput<int64_t>(const_cast<int64_t*>(mine.data()), mine.size());
    opts.setOutput<int64_t>(all.data(), all.size());
    opts.setTag(detail::Fingerprint::check_tag(fp.seq));
    opts.setTimeout(options_.timeout);
    gloo::allgather(opts);
    std::vector<detail::Fingerprint> fps;
    for (int r = 0; r < size(); ++r) fps.push_back(detail::Fingerprint::unpack(&all[4 * r]));
    const std::string msg = detail::compare_fingerprints(fps, "gloo");
    if (!msg.empty()) throw Mismatch(msg);
  }

  void run() {
    uint64_t seq = 0;
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      detail::Fingerprint fp = task.fp;
      fp.seq = seq++;
      if (!broken_.empty()) {
        task.work->finish("[gloo] " + fp.str() + " on rank " + std::to_string(rank()) +
                          ": the process group failed earlier: " + broken_);
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        busy_ = true;
        current_ = fp;
        current_work_ = task.work;
        busy_since_ = Clock::now();
      }
      task.work->start();
      std::string error;
      bool mismatch = false;
      try {
        if (needs_check(fp)) check_fingerprint(fp);
        task.fn(fp.tag());
      } catch (const Mismatch& e) {
        error = e.what();
        mismatch = true;
      } catch (const std::exception& e) {
        error = e.what();
      }
      std::string aborted;
      {
        std::lock_guard<std::mutex> lock(mu_);
        busy_ = false;
        done_ = fp.seq + 1;
        current_work_.reset();
        aborted = abort_reason_;
      }
      if (error.empty()) {
        task.work->finish("");
        continue;
      }
      if (!aborted.empty() || mismatch) {
        broken_ = aborted.empty() ? error : aborted;
      } else {
        std::string disagree;
        const std::string why = diagnose(fp, error, disagree);
        broken_ = !disagree.empty()
                      ? disagree + " (then: " + error + ")"
                      : "[gloo] " + fp.str() + " failed on rank " + std::to_string(rank()) +
                            " of " + std::to_string(size()) + why + ": " + error;
      }
      task.work->finish(broken_);
    }
  }

  // Fails the collective in flight with `reason` at once, and every later one.
  // Closing this rank's connections fails the peers' collectives too. Gloo's
  // blocking call on this rank cannot be interrupted (only a peer's close or
  // the timeout ends it), so the worker is left to finish on its own.
  void abort(const std::string& reason) {
    std::shared_ptr<GlooWork> work;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!abort_reason_.empty()) return;
      abort_reason_ = reason;
      work = current_work_;
    }
    if (work) work->finish(reason);
    if (shm_) shm_->abort();
    ctx_->closeConnections();
  }

  std::string hb_key(int r) const { return prefix_ + "/hb/" + std::to_string(r); }

  // The ranks on the machine whose address Gloo's error names ("[10.0.0.2]:port"),
  // as "rank 3 (on 10.0.0.2)" or "ranks 2, 3 (on 10.0.0.2)"; "" when none.
  std::string ranks_at(const std::string& gloo_error) const {
    const size_t open = gloo_error.rfind('[');  // the first one is Gloo's source file
    const size_t close = gloo_error.find(']', open == std::string::npos ? 0 : open);
    if (open == std::string::npos || close == std::string::npos) return "";
    const std::string addr = gloo_error.substr(open + 1, close - open - 1);
    std::string ranks, host;
    int n = 0;
    for (int r = 0; r < size(); ++r) {
      const std::string& h = peer_hosts_[static_cast<size_t>(r)];
      if (r == rank() || h.rfind(addr, 0) != 0 || (h.size() > addr.size() && h[addr.size()] != ','))
        continue;
      ranks += (n++ ? ", " : "") + std::to_string(r);
      host = h;
    }
    if (n == 0) return "";
    return (n == 1 ? "rank " : "ranks ") + ranks + " (on " + host + ")";
  }

  // "the store at 10.0.0.1:29500 (hosted by rank 0)".
  std::string store_name() const {
    return "the store at " + store_->host() + ":" + std::to_string(store_->port()) +
           " (hosted by " + store_->options().server_name + ")";
  }

  // "rank 3 (on 10.0.0.2)": errors name the machine of a rank.
  std::string rank_name(int r) const {
    const std::string& h = peer_hosts_[static_cast<size_t>(r)];
    return "rank " + std::to_string(r) + (h.empty() ? "" : " (on " + h + ")");
  }

  void heartbeat() {
    const std::string key = hb_key(rank());
    int64_t beat = 0;
    Clock::time_point next_probe{}, next_log{};
    uint64_t watched_seq = UINT64_MAX;
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      const bool busy = busy_;
      const detail::Fingerprint fp = current_;
      const auto since = busy_since_;
      const uint64_t done = done_;
      lock.unlock();
      // A store that does not answer is reported in the wait lines, not a
      // reason to stop beating: it may come back, and until the collective's
      // timeout this rank must keep saying what it waits for.
      store_call([&] { hb_store_->set(key, PeerState::format(++beat, busy, fp, done)); });
      const auto now = Clock::now();
      if (busy && fp.seq != watched_seq) {  // a new collective: start watching it afresh
        watched_seq = fp.seq;
        next_probe = since + kProbeAfter;
        next_log = options_.wait_log_interval.count() > 0 ? since + options_.wait_log_interval
                                                          : Clock::time_point::max();
      }
      if (busy && now >= next_probe) {
        next_probe = Clock::now() + kProbePeriod;
        if (store_silent_since_ == Clock::time_point{}) store_call([&] { probe(fp); });
      }
      if (busy && Clock::now() >= next_log) {
        next_log += options_.wait_log_interval;
        log_line(wait_report(fp, Clock::now() - since));
      }
      // Gloo's timeout bounds each send and receive, not the collective, so a
      // ring of several steps could wait several timeouts: hold the whole
      // collective to one (Gloo's own error, a little earlier, says more).
      if (busy && Clock::now() - since >= options_.timeout + kDeadlineGrace)
        abort(timeout_report(fp, Clock::now() - since));
      lock.lock();
      cv_hb_.wait_for(lock, kHeartbeatPeriod, [&] { return stop_; });
    }
  }

  // Runs a heartbeat store call; failures only mark the store silent.
  template <typename F>
  void store_call(F&& f) {
    try {
      f();
      store_silent_since_ = Clock::time_point{};
      store_ok_at_ = Clock::now();
      store_silent_ = false;
    } catch (const std::exception& e) {
      // Silent since the last call that was answered.
      if (store_silent_since_ == Clock::time_point{}) store_silent_since_ = store_ok_at_;
      store_error_ = e.what();
      store_silent_ = true;
    }
  }

  // Reads every peer's heartbeat; stops this rank's collective when a peer
  // is (or was, if it died there) blocked in a different one at the same
  // position: each rank's n-th collective meets the others' n-th.
  void probe(const detail::Fingerprint& fp) {
    const auto now = Clock::now();
    for (int r = 0; r < size(); ++r) {
      if (r == rank()) continue;
      Track& t = tracks_[static_cast<size_t>(r)];
      const std::string k = hb_key(r);
      const std::string v = hb_store_->check({k}) ? hb_store_->get_string(k) : "";
      if (t.first_seen == Clock::time_point{}) {
        t.first_seen = now;
      } else if (v != t.value) {
        t.changed = now;
      }
      t.value = v;
      t.state = PeerState::parse(v);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int r = 0; r < size(); ++r)
        if (r != rank()) peer_silent_[r] = tracks_[static_cast<size_t>(r)].silent(now);
    }
    for (int r = 0; r < size(); ++r) {
      if (r == rank()) continue;
      const Track& t = tracks_[static_cast<size_t>(r)];
      if (t.state.valid && t.state.busy && t.state.fp.seq == fp.seq && !t.state.fp.same_call(fp)) {
        std::vector<detail::Fingerprint> both(static_cast<size_t>(size()), fp);
        both[static_cast<size_t>(r)] = t.state.fp;
        abort(detail::compare_fingerprints(both, "gloo") + "; found while rank " +
              std::to_string(rank()) + " waited " + seconds_str(now - busy_since()));
        return;
      }
    }
  }

  Clock::time_point busy_since() {
    std::lock_guard<std::mutex> lock(mu_);
    return busy_since_;
  }

  // One line on a collective this rank has been blocked in for `waited`.
  std::string wait_report(const detail::Fingerprint& fp, Clock::duration waited) const {
    const auto now = Clock::now();
    std::string peers;
    int same = 0;
    for (int r = 0; r < size(); ++r) {
      if (r == rank()) continue;
      const Track& t = tracks_[static_cast<size_t>(r)];
      std::string what;
      if (t.first_seen == Clock::time_point{} || !t.state.valid) {
        what = "no heartbeat seen yet";
      } else if (t.silent(now) >= kSilent) {
        what = "no heartbeat for " + seconds_str(t.silent(now)) + " (stopped, hung or dead?)";
      } else if (t.changed == Clock::time_point{}) {
        what = "heartbeat not seen to change yet";
      } else if (!t.state.busy) {
        what = "alive, between collectives (its next is #" + std::to_string(t.state.fp.seq) +
               "; busy elsewhere, or it issued fewer collectives?)";
      } else if (t.state.fp.seq != fp.seq || !t.state.fp.same_call(fp)) {
        what = "alive, in collective " + t.state.fp.str();
      } else {
        ++same;
        continue;
      }
      peers += (peers.empty() ? "" : "; ") + rank_name(r) + ": " + what;
    }
    if (peers.empty())
      peers = "every other rank is in it too (a slow network?)";
    else if (same > 0)
      peers += "; " + std::to_string(same) + " other rank(s) are in it too";
    if (store_silent_since_ != Clock::time_point{})
      peers = store_name() + " has not answered for " + seconds_str(now - store_silent_since_) +
              " (the link to its machine down, or its host stopped?), so the peers' state is as "
              "last seen: " +
              peers + " (last store error: " + store_error_ + ")";
    return "[gloo] rank " + std::to_string(rank()) + " is still waiting in collective " + fp.str() +
           " after " + seconds_str(waited) + " of " + seconds_str(options_.timeout) + ": " + peers;
  }

  // The error of a collective stopped at the timeout: the peers whose
  // heartbeat stopped, or the store that stopped answering, or where the peers are.
  std::string timeout_report(const detail::Fingerprint& fp, Clock::duration waited) const {
    const auto now = Clock::now();
    std::string lost;
    for (int r = 0; r < size(); ++r) {
      if (r == rank()) continue;
      const Track& t = tracks_[static_cast<size_t>(r)];
      if (t.first_seen != Clock::time_point{} && t.silent(now) >= kSilent)
        lost += (lost.empty() ? "" : ", ") + rank_name(r) + ": no heartbeat for " +
                seconds_str(t.silent(now));
    }
    std::string why;
    if (!lost.empty())
      why = "lost " + lost;
    else if (store_silent_since_ != Clock::time_point{})
      why = "the store at " + store_->host() + ":" + std::to_string(store_->port()) +
            " has not answered for " + seconds_str(now - store_silent_since_) +
            " either: the link to its machine is down, or its host stopped";
    else
      why = wait_report(fp, waited);
    return "[gloo] " + fp.str() + " failed on rank " + std::to_string(rank()) + " of " +
           std::to_string(size()) + " (" + why + "): no progress for " + seconds_str(waited) +
           ", over the timeout of " + seconds_str(options_.timeout);
  }

  // After a failure: which peers stopped beating, and where the others are.
  // Reads every heartbeat twice, a few periods apart. A peer that was blocked
  // in another collective at the same position sets `disagree` (the peer that
  // noticed first closed its connections, which is how this one failed).
  std::string diagnose(const detail::Fingerprint& fp, const std::string& error,
                       std::string& disagree) {
    if (!hb_store_) return "";
    // Without the store, Gloo's error still names the peer's address.
    auto store_gone = [&](const std::string& detail) {
      const std::string peers = ranks_at(error);
      return " (" + (peers.empty() ? "" : "lost " + peers + "; ") + store_name() +
             " does not answer either: the link to its machine is down, or its host stopped" +
             detail + ")";
    };
    // A store the heartbeat already finds silent would only hold this up.
    if (store_silent_.load()) return store_gone("");
    auto read = [&](std::vector<std::string>& v) {
      for (int r = 0; r < size(); ++r) {
        if (r == rank()) continue;
        const std::string k = hb_key(r);
        v[r] = hb_store_->check({k}) ? hb_store_->get_string(k) : "";
      }
    };
    std::vector<std::string> a(size()), b(size());
    try {
      read(a);
      std::vector<detail::Fingerprint> fps(static_cast<size_t>(size()), fp);
      bool differs = false;
      for (int r = 0; r < size(); ++r) {
        const PeerState p = PeerState::parse(a[r]);
        if (r == rank() || !p.valid || !p.busy || p.fp.seq != fp.seq) continue;
        fps[static_cast<size_t>(r)] = p.fp;
        differs |= !p.fp.same_call(fp);
      }
      if (differs) {
        disagree = detail::compare_fingerprints(fps, "gloo");
        return "";
      }
      std::this_thread::sleep_for(kHeartbeatPeriod * 4);
      read(b);
    } catch (const std::exception& e) {
      return store_gone(std::string("; ") + e.what());
    }
    // How long each lost peer has been silent: as the heartbeat thread last
    // saw it while this collective waited, else the pause between the reads.
    std::vector<Clock::duration> silent;
    {
      std::lock_guard<std::mutex> lock(mu_);
      silent = peer_silent_;
    }
    std::string lost, elsewhere;
    for (int r = 0; r < size(); ++r) {
      if (r == rank()) continue;
      if (a[r] == b[r]) {
        const Clock::duration quiet = std::max<Clock::duration>(silent[r], kHeartbeatPeriod * 4);
        lost +=
            (lost.empty() ? "" : ", ") + rank_name(r) + ": no heartbeat for " + seconds_str(quiet);
        continue;
      }
      const PeerState p = PeerState::parse(b[r]);
      if (!p.valid || (p.busy && p.fp == fp)) continue;
      elsewhere +=
          "; " + rank_name(r) +
          (p.busy ? " is in collective " + p.fp.str()
                  : " is between collectives (its next is #" + std::to_string(p.fp.seq) + ")");
    }
    std::string out;
    if (!lost.empty()) out = "lost " + lost;
    if (!elsewhere.empty()) out += out.empty() ? elsewhere.substr(2) : elsewhere;
    return out.empty() ? "" : " (" + out + ")";
  }

  int rank_;
  int size_;
  std::shared_ptr<TcpStore> store_;
  ProcessGroupOptions options_;
  std::string prefix_;
  int64_t checks_;
  std::shared_ptr<gloo::Context> ctx_;
  std::unique_ptr<TcpStore> hb_store_;
  HdCache hd_cache_;                           // worker thread only
  std::unique_ptr<detail::ShmAllreduce> shm_;  // two ranks on one machine
  std::vector<Track> tracks_;                  // heartbeat thread only
  std::vector<std::string> peer_hosts_;        // each rank's machine (set before the threads start)
  std::vector<Clock::duration> peer_silent_;   // under mu_: as the heartbeat thread last saw
  Clock::time_point store_silent_since_{};     // heartbeat thread only: {} while the store answers
  Clock::time_point store_ok_at_ = Clock::now();  // heartbeat thread only: the last answer
  std::atomic<bool> store_silent_{false};         // the heartbeat's last store call failed
  std::string store_error_;                       // heartbeat thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable cv_hb_;
  std::deque<Task> queue_;
  bool stop_ = false;
  bool busy_ = false;            // in a collective ...
  detail::Fingerprint current_;  // ... this one ...
  std::shared_ptr<GlooWork> current_work_;
  Clock::time_point busy_since_{};  // ... since then
  uint64_t done_ = 0;               // collectives finished
  std::string abort_reason_;
  std::string broken_;  // worker thread only
  std::thread worker_;
  std::thread hb_thread_;
};

class GlooGroup : public ProcessGroup {
 public:
  GlooGroup(std::shared_ptr<TcpStore> store, int rank, int size, ProcessGroupOptions options,
            const std::string& prefix)
      : ProcessGroup(rank, size),
        core_(
            std::make_shared<GlooCore>(std::move(store), rank, size, std::move(options), prefix)) {
    core_->start();
  }
  ~GlooGroup() override { core_->shutdown(); }

  std::string backend_name() const override { return "gloo"; }
  // Counted once the core accepted the call (a rejected one moved nothing).
  WorkPtr all_reduce(const Tensor& t, ReduceOp op) override {
    return counted(core_->all_reduce(t, op), t.nbytes());
  }
  WorkPtr broadcast(const Tensor& t, int root) override {
    return counted(core_->broadcast(t, root), t.nbytes());
  }
  WorkPtr all_gather(const Tensor& out, const Tensor& in) override {
    return counted(core_->all_gather(out, in), in.nbytes());
  }
  WorkPtr reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) override {
    return counted(core_->reduce_scatter(out, in, op), in.nbytes());
  }
  WorkPtr barrier() override { return counted(core_->barrier(), 0); }

 private:
  WorkPtr counted(WorkPtr w, size_t bytes) {
    count_collective(static_cast<int64_t>(bytes));
    return w;
  }
  std::shared_ptr<GlooCore> core_;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_gloo_group(std::shared_ptr<TcpStore> store, int rank, int size,
                                              ProcessGroupOptions options,
                                              const std::string& prefix) {
  return std::make_shared<GlooGroup>(std::move(store), rank, size, std::move(options), prefix);
}

}  // namespace tcv::dist
