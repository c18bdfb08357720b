#include "dist/reducer.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "engine/autograd.h"
#include "engine/cuda.h"

namespace tcv::dist {

std::vector<std::vector<size_t>> compute_bucket_assignment(const std::vector<Tensor>& params,
                                                           const std::vector<size_t>& order,
                                                           size_t first_cap_bytes,
                                                           size_t cap_bytes) {
  struct Open {
    std::vector<size_t> params;
    size_t bytes = 0;
    bool first = true;  // the next bucket closed for this key is its first
  };
  // Keyed by (dtype, device), as a bucket is one flat buffer.
  std::map<std::tuple<int, int, int>, Open> open;
  std::vector<std::vector<size_t>> out;
  for (size_t i : order) {
    TCV_CHECK(i < params.size(), "[compute_bucket_assignment] index ", i, " out of range for ",
              params.size(), " parameters");
    const Tensor& p = params[i];
    const auto key = std::make_tuple(static_cast<int>(p.dtype()), static_cast<int>(p.device().type),
                                     static_cast<int>(p.device().index));
    Open& o = open[key];
    o.params.push_back(i);
    o.bytes += p.nbytes();
    if (o.bytes >= (o.first ? first_cap_bytes : cap_bytes)) {
      out.push_back(std::move(o.params));
      o.params.clear();
      o.bytes = 0;
      o.first = false;
    }
  }
  for (auto& [key, o] : open)
    if (!o.params.empty()) out.push_back(std::move(o.params));
  // Sort by where each bucket's first parameter sits in `order`.
  std::vector<size_t> pos(params.size(), 0);
  for (size_t k = 0; k < order.size(); ++k) pos[order[k]] = k;
  std::sort(out.begin(), out.end(),
            [&](const auto& a, const auto& b) { return pos[a.front()] < pos[b.front()]; });
  return out;
}

namespace {

size_t mib(double mb) {
  return static_cast<size_t>(mb * 1024.0 * 1024.0);
}

// Length of the union of intervals, and of its intersection with [lo, hi].
std::pair<double, double> union_length(std::vector<std::pair<double, double>> iv, double lo,
                                       double hi) {
  std::sort(iv.begin(), iv.end());
  double total = 0, inside = 0, cur_b = 0, cur_e = -1;
  auto flush = [&] {
    if (cur_e <= cur_b) return;
    total += cur_e - cur_b;
    inside += std::max(0.0, std::min(cur_e, hi) - std::max(cur_b, lo));
  };
  for (auto [b, e] : iv) {
    if (b > cur_e) {
      flush();
      cur_b = b;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  flush();
  return {total, inside};
}

}  // namespace

Reducer::Reducer(nn::StateDict params, std::shared_ptr<ProcessGroup> group, ReducerOptions opts)
    : params_(std::move(params)),
      group_(std::move(group)),
      opts_(opts),
      default_hook_(allreduce_hook()),
      t0_(std::chrono::steady_clock::now()) {
  TCV_CHECK(group_ != nullptr, "[Reducer] needs a process group");
  TCV_CHECK(opts_.bucket_cap_mb > 0 && opts_.first_bucket_mb > 0,
            "[Reducer] bucket sizes must be positive, got bucket_cap_mb ", opts_.bucket_cap_mb,
            " and first_bucket_mb ", opts_.first_bucket_mb);
  std::vector<Tensor> ts;
  for (auto& [name, p] : params_) {
    TCV_CHECK(p.requires_grad() && p.is_leaf(), "[Reducer] parameter ", name,
              " must be a leaf that requires grad");
    TCV_CHECK(is_floating(p.dtype()), "[Reducer] parameter ", name, " has non-floating dtype ",
              dtype_name(p.dtype()));
    ts.push_back(p);
  }
  // Backward produces the last layers' gradients first: start from the end.
  std::vector<size_t> order(params_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = order.size() - 1 - i;
  build_buckets(
      compute_bucket_assignment(ts, order, mib(opts_.first_bucket_mb), mib(opts_.bucket_cap_mb)));
  ready_.assign(params_.size(), 0);
  ready_us_.assign(params_.size(), -1);
  for (size_t i = 0; i < params_.size(); ++i)
    hook_ids_.push_back(params_[i].second.register_post_accumulate_grad_hook(
        [this, i](Tensor&) { on_grad_ready(i); }));
}

Reducer::~Reducer() {
  for (size_t i = 0; i < params_.size(); ++i)
    params_[i].second.remove_post_accumulate_grad_hook(hook_ids_[i]);
  for (Bucket& b : buckets_)
    if (b.future) b.future->abandon();
}

void Reducer::set_comm_hook(std::shared_ptr<CommHook> hook) {
  TCV_CHECK(!backward_seen_, "[DistributedDataParallel] register_comm_hook",
            hook ? " ('" + hook->name() + "')" : std::string(),
            " must be called before the first backward (as in PyTorch)");
  hook_ = std::move(hook);
}

double Reducer::now_us() const {
  return to_us(std::chrono::steady_clock::now());
}

double Reducer::to_us(std::chrono::steady_clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - t0_).count();
}

void Reducer::build_buckets(const std::vector<std::vector<size_t>>& assignment) {
  std::vector<Bucket> buckets;
  where_.assign(params_.size(), {-1, -1});
  for (const auto& ps : assignment) {
    Bucket b;
    b.params = ps;
    int64_t n = 0;
    for (size_t i : ps) {
      b.offsets.push_back(n);
      n += params_[i].second.numel();
    }
    const Tensor& p0 = params_[ps.front()].second;
    b.buffer = zeros({n}, {.dtype = p0.dtype(), .device = p0.device()});
    for (size_t k = 0; k < ps.size(); ++k)
      where_[ps[k]] = {static_cast<int64_t>(buckets.size()), static_cast<int64_t>(k)};
    buckets.push_back(std::move(b));
  }
  buckets_ = std::move(buckets);
  // Gradients become views of the new buffers, keeping their values.
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    const Tensor old = p.grad();
    const auto [bi, k] = where_[i];
    Tensor view = buckets_[bi].buffer.narrow(0, buckets_[bi].offsets[k], p.numel()).view(p.shape());
    if (old.defined()) view.copy_(old);
    p.set_grad(view);
  }
}

void Reducer::ensure_grad_view(size_t i) {
  Tensor& p = params_[i].second;
  const auto [bi, k] = where_[i];
  const Bucket& b = buckets_[bi];
  const Tensor g = p.grad();
  if (g.defined() && g.storage() == b.buffer.storage() && g.offset() == b.offsets[k] &&
      g.is_contiguous())
    return;
  NoGradGuard no_grad;
  Tensor view = b.buffer.narrow(0, b.offsets[k], p.numel()).view(p.shape());
  if (g.defined())
    view.copy_(g);
  else
    view.zero_();
  p.set_grad(view);
}

void Reducer::reset_pending() {
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(ready_us_.begin(), ready_us_.end(), -1.0);
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int64_t>(b.params.size());
    b.future.reset();
    b.collectives = b.bytes = 0;
    b.start_us = -1;
    b.done_us = -1;
  }
  next_launch_ = 0;
  issued_ = 0;
  launch_order_.clear();
  ready_order_.clear();
  callback_queued_ = false;
  bwd_begin_us_ = -1;
}

void Reducer::prepare_for_forward() {
  if (rebuild_due_) rebuild();
  for (size_t i = 0; i < params_.size(); ++i) ensure_grad_view(i);
  expect_hooks_ = false;
  if (require_sync_) events_.clear();
}

void Reducer::prepare_for_backward(const std::vector<Tensor>& outputs) {
  expect_hooks_ = true;
  // Decided at forward, as PyTorch does: no_sync() must cover the forward.
  sync_backward_ = require_sync_;
  backward_seen_ = true;
  if (!sync_backward_) return;
  reset_pending();
  if (!opts_.find_unused_parameters) return;
  // Every AccumulateGrad the outputs reach; the other parameters are unused.
  std::unordered_map<const TensorImpl*, size_t> index;
  for (size_t i = 0; i < params_.size(); ++i) index[params_[i].second.impl_ptr().get()] = i;
  std::vector<uint8_t> used(params_.size(), 0);
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const Tensor& out : outputs) {
    const Edge e = autograd::gradient_edge(out);
    if (e.valid() && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (auto* acc = dynamic_cast<AccumulateGrad*>(n)) {
      auto it = index.find(acc->variable().impl_ptr().get());
      if (it != index.end()) used[it->second] = 1;
    }
    for (const Edge& e : n->next_edges)
      if (e.valid() && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  for (size_t i = 0; i < params_.size(); ++i)
    if (!used[i]) mark_ready(i);
}

void Reducer::on_grad_ready(size_t i) {
  ensure_grad_view(i);
  if (!expect_hooks_ || !sync_backward_) return;
  if (!callback_queued_) {
    callback_queued_ = true;
    autograd::queue_callback([this] { finalize(); });
  }
  if (bwd_begin_us_ < 0) bwd_begin_us_ = now_us();
  TCV_CHECK(!ready_[i], "[DistributedDataParallel] parameter ", params_[i].first,
            " got its gradient twice in one backward (or was marked unused but is used); "
            "a parameter must take part in the graph at most once per synchronised backward");
  mark_ready(i);
  poll_done();
}

void Reducer::mark_ready(size_t i) {
  ready_[i] = 1;
  ready_order_.push_back(i);
  ready_us_[i] = now_us();
  if (--buckets_[where_[i].first].pending == 0) launch_ready_buckets();
}

void Reducer::launch_ready_buckets() {
  // Index order on every rank: a ready bucket waits for the ones before it.
  while (next_launch_ < num_buckets() && buckets_[next_launch_].pending == 0)
    launch(next_launch_++);
}

template <typename F>
void Reducer::counted(int64_t bi, F&& fn) {
  Bucket& b = buckets_[bi];
  const CommStats before = group_->stats();
  fn(b);
  const CommStats after = group_->stats();
  b.collectives += after.collectives - before.collectives;
  b.bytes += after.bytes - before.bytes;
}

void Reducer::issue_collectives_before(int64_t bi) {
  // One order on every rank: a bucket's chain of collectives (PowerSGD's P,
  // then Q) is issued in full before the next bucket's first, blocking on its
  // own collectives where it must. This point (a launch, or the end of
  // backward) is the same on every rank, so collectives others issue on the
  // group in between (SyncBatchNorm's) keep one order too.
  for (; issued_ < bi; ++issued_)
    counted(issued_, [](Bucket& b) { b.future->issue_collectives(); });
}

void Reducer::launch(int64_t bi) {
  issue_collectives_before(bi);
  CommHook& hook = hook_ ? *hook_ : *default_hook_;
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (size_t i : buckets_[bi].params) {
    names.push_back(params_[i].first);
    shapes.push_back(params_[i].second.shape());
  }
  const GradBucket gb(bi, buckets_[bi].buffer, std::move(names), std::move(shapes),
                      buckets_[bi].offsets, bi + 1 == num_buckets());
  buckets_[bi].launch_us = now_us();
  counted(bi, [&](Bucket& b) {
    NoGradGuard no_grad;
    b.future = hook.run(*group_, gb);
  });
  TCV_CHECK(buckets_[bi].future != nullptr, "[DistributedDataParallel] comm hook '", hook.name(),
            "' returned no future for bucket ", bi);
  launch_order_.push_back(bi);
}

template <typename F>
void Reducer::local_steps(int64_t bi, F&& fn) {
  const int64_t issued = buckets_[bi].collectives;
  counted(bi, std::forward<F>(fn));
  TCV_CHECK(buckets_[bi].collectives == issued, "[DistributedDataParallel] comm hook '",
            (hook_ ? *hook_ : *default_hook_).name(), "' started a collective in a then() step ",
            "of bucket ", bi, "; steps that start collectives must be then_collective(), so ",
            "that every rank issues them at the same point");
}

void Reducer::poll_done() {
  for (int64_t bi = 0; bi < next_launch_; ++bi) {
    Bucket& b = buckets_[bi];
    if (b.done_us >= 0 || !b.future) continue;
    // Local steps only (decompression): they may run at any time.
    bool done = false;
    local_steps(bi, [&](Bucket& bb) { done = bb.future->poll(); });
    if (done) record_done(b);
  }
}

void Reducer::record_done(Bucket& b) {
  // The backend's own times where it keeps them: seen from here, completion
  // shows only at the next hook, which can be milliseconds later.
  const auto zero = std::chrono::steady_clock::time_point{};
  const auto started = b.future->started_at(), finished = b.future->finished_at();
  if (started != zero) b.start_us = to_us(started);
  b.done_us = finished != zero ? to_us(finished) : now_us();
}

void Reducer::finalize() {
  expect_hooks_ = false;
  bwd_end_us_ = now_us();
  poll_done();
  std::vector<std::string> missing;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!ready_[i]) missing.push_back(params_[i].first);
  if (!missing.empty()) {
    for (int64_t bi = 0; bi < next_launch_; ++bi) buckets_[bi].future->abandon();
    std::string names;
    for (size_t k = 0; k < missing.size() && k < 20; ++k) names += (k ? ", " : "") + missing[k];
    if (missing.size() > 20) names += ", ... (" + std::to_string(missing.size()) + " in all)";
    reset_pending();
    TCV_THROW("[DistributedDataParallel] rank ", group_->rank(), ": backward finished but ",
              missing.size(), " parameter(s) received no gradient: ", names,
              ". Their buckets were never all-reduced, so the ranks would diverge. If your "
              "model does not use every parameter in every forward, construct "
              "DistributedDataParallel with find_unused_parameters = true "
              "(network.find_unused_parameters = true); otherwise make sure the forward's "
              "outputs all feed the loss.");
  }
  launch_ready_buckets();
  const double w0 = now_us();
  issue_collectives_before(num_buckets());
  for (int64_t bi = 0; bi < num_buckets(); ++bi) {
    local_steps(bi, [](Bucket& b) {
      NoGradGuard no_grad;
      b.future->wait();
    });
    Bucket& b = buckets_[bi];
    if (b.done_us < 0) record_done(b);
    b.future.reset();
  }
  const double w1 = now_us();

  // Stats and timeline.
  std::vector<std::pair<double, double>> iv;
  stats_.collectives = stats_.bytes = stats_.bucket_bytes = 0;
  for (int64_t bi = 0; bi < num_buckets(); ++bi) {
    const Bucket& b = buckets_[bi];
    iv.emplace_back(b.launch_us, b.done_us);
    events_.push_back({"allreduce", b.launch_us, b.done_us, bi, b.bytes, b.start_us});
    stats_.collectives += b.collectives;
    stats_.bytes += b.bytes;
    stats_.bucket_bytes += static_cast<int64_t>(b.buffer.nbytes());
  }
  const auto [comm, hidden] = union_length(iv, bwd_begin_us_, bwd_end_us_);
  events_.push_back({"backward", bwd_begin_us_, bwd_end_us_, -1, 0});
  stats_.step = ++syncs_;
  stats_.num_buckets = num_buckets();
  stats_.backward_s = (bwd_end_us_ - bwd_begin_us_) * 1e-6;
  stats_.comm_s = comm * 1e-6;
  stats_.hidden_s = hidden * 1e-6;
  stats_.exposed_s = (comm - hidden) * 1e-6;
  stats_.wait_s = (w1 - w0) * 1e-6;
  // First the ready order (as PyTorch); the timed plan then wants warm
  // timings: the first backward also pays for first-time allocations and
  // kernel set-up.
  if (opts_.rebuild_buckets && !rebuilt_) {
    rebuild_due_ = true;
  } else if (rebuilt_ && !planned_ && plans_buckets()) {
    if (ready_history_.empty()) ready_history_.resize(params_.size());
    for (size_t i = 0; i < params_.size(); ++i)
      ready_history_[i].push_back(
          ((ready_us_[i] >= 0 ? ready_us_[i] : bwd_end_us_) - bwd_begin_us_) * 1e-6);
    if (static_cast<int64_t>(ready_history_[0].size()) >= timed_steps()) rebuild_due_ = true;
  }
}

bool Reducer::plans_buckets() const {
  return opts_.rebuild_buckets && opts_.bucket_plan == BucketPlan::timed && group_->size() > 1 &&
         !params_.empty() && timed_steps() >= 1;
}

// Step 0 cuts in the ready order, steps 1..T are timed, step T+1 runs on the
// plan: T + 1 <= the step the hook's per-bucket state starts.
int64_t Reducer::timed_steps() const {
  const int64_t state_from = hook_ ? hook_->keeps_bucket_state_from() : INT64_MAX;
  return std::min(opts_.timed_plan_steps, state_from - 1);
}

void Reducer::rebuild() {
  rebuild_due_ = false;
  const bool planned = rebuilt_ && plans_buckets();
  rebuilt_ = true;
  planned_ = planned_ || planned;
  if (planned) cost_ = calibrate();  // collective: every rank times, rank 0's fit is used
  // Rank 0 sends its ready order (completed with any parameter it did not
  // see), each position's bucket, and its fitted cost: only rank 0's timings
  // decide, so every rank builds the same buckets.
  const size_t n = params_.size();
  Tensor msg = zeros({static_cast<int64_t>(2 * n + 2)}, {.dtype = DType::i64});
  if (group_->rank() == 0) {
    std::vector<size_t> ord;
    std::vector<uint8_t> seen(n, 0);
    for (size_t i : ready_order_)
      if (!seen[i]) {
        seen[i] = 1;
        ord.push_back(i);
      }
    for (size_t i = n; i-- > 0;)
      if (!seen[i]) ord.push_back(i);
    std::vector<Tensor> ts;
    for (auto& [name, p] : params_) ts.push_back(p);
    const auto assignment = planned ? planned_assignment(ord, *cost_)
                                    : compute_bucket_assignment(ts, ord, mib(opts_.first_bucket_mb),
                                                                mib(opts_.bucket_cap_mb));
    std::vector<int64_t> bucket_of(n, -1);
    for (size_t b = 0; b < assignment.size(); ++b)
      for (size_t i : assignment[b]) bucket_of[i] = static_cast<int64_t>(b);
    auto* o = msg.data<int64_t>();
    for (size_t k = 0; k < n; ++k) {
      o[k] = static_cast<int64_t>(ord[k]);
      o[n + k] = bucket_of[ord[k]];
    }
    if (cost_) {
      std::memcpy(&o[2 * n], &cost_->latency_s, sizeof(double));
      std::memcpy(&o[2 * n + 1], &cost_->bytes_per_s, sizeof(double));
    }
  }
  // On the parameters' device: NCCL moves only device memory.
  Tensor wire = msg.to(params_.front().second.device());
  group_->broadcast(wire, 0)->wait();
  const auto v = wire.to_vector<int64_t>();
  std::vector<std::vector<size_t>> assignment;
  for (size_t k = 0; k < n; ++k) {
    const auto b = static_cast<size_t>(v[n + k]);
    if (assignment.size() <= b) assignment.resize(b + 1);
    assignment[b].push_back(static_cast<size_t>(v[k]));
  }
  if (planned) {
    AllReduceCost c;
    std::memcpy(&c.latency_s, &v[2 * n], sizeof(double));
    std::memcpy(&c.bytes_per_s, &v[2 * n + 1], sizeof(double));
    cost_ = c;
  }
  build_buckets(assignment);
}

AllReduceCost Reducer::calibrate() {
  // Two sizes: 32 KiB, nearly all latency, and 4 MiB (or every gradient, if
  // fewer), nearly all bandwidth; the median of seven timed runs each, after
  // an untimed one (which also builds any per-size state in the backend):
  // the typical cost on the machine as it is, other jobs included, not the
  // best case. The latency is the small one's time and the bandwidth the
  // large one's extra bytes over its extra time: a least-squares line through
  // noisy samples can cross zero and claim all-reduces cost nothing to launch.
  const Device dev = params_.front().second.device();
  int64_t total = 0;
  for (const auto& [name, p] : params_) total += p.nbytes();
  const int64_t small = int64_t{32} << 10;
  const int64_t large = std::max(small, std::min(int64_t{4} << 20, total));
  auto sync = [&] {
    if (dev.is_cuda()) cuda::stream_synchronize(cuda::compute_stream());
  };
  auto typical = [&](int64_t bytes) {
    Tensor t = zeros({bytes / 4}, {.dtype = DType::f32, .device = dev});
    group_->all_reduce(t, ReduceOp::sum)->wait();
    sync();
    std::vector<double> runs;
    for (int rep = 0; rep < 7; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      group_->all_reduce(t, ReduceOp::sum)->wait();
      sync();
      runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::nth_element(runs.begin(), runs.begin() + 3, runs.end());
    return std::max(runs[3], 1e-9);
  };
  const double t_small = typical(small);
  AllReduceCost c;
  c.latency_s = t_small;
  c.bytes_per_s = 1e30;  // nothing larger to tell: latency alone
  if (large > small) {
    const double t_large = typical(large);
    const auto extra = static_cast<double>(large - small);
    c.bytes_per_s =
        t_large > t_small ? extra / (t_large - t_small) : static_cast<double>(large) / t_large;
  }
  return c;
}

std::vector<std::vector<size_t>> Reducer::planned_assignment(const std::vector<size_t>& order,
                                                             const AllReduceCost& cost) const {
  // One plan per (dtype, device) key, as a bucket is one flat buffer. Each
  // gradient's ready time is the median, over the timed backwards, of its
  // time after that backward's first gradient (the end of backward when it
  // was never ready).
  std::map<std::tuple<int, int, int>, std::vector<size_t>> by_key;
  for (size_t i : order) {
    const Tensor& p = params_[i].second;
    by_key[std::make_tuple(static_cast<int>(p.dtype()), static_cast<int>(p.device().type),
                           static_cast<int>(p.device().index))]
        .push_back(i);
  }
  BucketPlanOptions po = opts_.plan;
  po.max_bucket_bytes = static_cast<double>(mib(opts_.bucket_cap_mb));
  std::vector<std::vector<size_t>> out;
  for (const auto& [key, ps] : by_key) {
    std::vector<ParamTiming> timing;
    for (size_t i : ps) {
      std::vector<double> h = ready_history_[i];
      std::nth_element(h.begin(), h.begin() + static_cast<std::ptrdiff_t>(h.size() / 2), h.end());
      timing.push_back({h[h.size() / 2], static_cast<double>(params_[i].second.nbytes())});
    }
    size_t k = 0;
    for (size_t count : plan_buckets(timing, cost, po)) {
      out.emplace_back(ps.begin() + static_cast<std::ptrdiff_t>(k),
                       ps.begin() + static_cast<std::ptrdiff_t>(k + count));
      k += count;
    }
  }
  std::vector<size_t> pos(params_.size(), 0);
  for (size_t k = 0; k < order.size(); ++k) pos[order[k]] = k;
  std::sort(out.begin(), out.end(),
            [&](const auto& a, const auto& b) { return pos[a.front()] < pos[b.front()]; });
  return out;
}

}  // namespace tcv::dist
