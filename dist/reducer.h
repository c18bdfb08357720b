// The Reducer: PyTorch DDP's gradient bucketing. Parameters are packed into
// flat per-(dtype, device) buckets whose slices are the parameters' .grad, so
// AccumulateGrad writes straight into the buckets; a post-accumulate-grad hook
// marks each parameter ready, a bucket whose parameters are all ready launches
// its all-reduce at once (buckets launch in index order on every rank), and an
// end-of-backward callback launches what is left and waits for everything, so
// the optimizer step sees averaged gradients. What a launch does with a
// bucket is a communication hook (dist/comm_hook.h): all-reduce by default.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/comm_hook.h"
#include "dist/comm_model.h"
#include "dist/process_group.h"
#include "layers/module.h"

namespace tcv::dist {

/// How the buckets are cut when they are rebuilt after the first backward.
enum class BucketPlan : uint8_t {
  /// PyTorch's rule: in the order gradients became ready, a first bucket of
  /// first_bucket_mb, then buckets of bucket_cap_mb.
  cap,
  /// Then, after timed_plan_steps more synchronised backwards, cut again in
  /// the same order at boundaries planned (plan_buckets in
  /// dist/comm_model.h) from when each gradient became ready there (the
  /// median over those backwards) and an all-reduce cost fitted to timed
  /// all-reduces on the group: every prefix of the gradients is reduced as
  /// early as the cost allows, so the last all-reduce ends soon after
  /// backward. No bucket grows past bucket_cap_mb. Groups of one rank keep
  /// the cap rule (nothing to plan for).
  timed,
};

struct ReducerOptions {
  /// Size of every bucket after the first (PyTorch's bucket_cap_mb).
  double bucket_cap_mb = 25.0;
  /// Size of the first bucket (the last layers' gradients): small, so the first
  /// all-reduce starts early in backward.
  double first_bucket_mb = 1.0;
  /// Traverse the graph after forward and mark parameters it does not reach
  /// ready (with their current, usually zero, gradients).
  bool find_unused_parameters = false;
  /// Rebuild the buckets once, after the first backward, in the order the
  /// gradients became ready there (rank 0's order and plan, broadcast).
  bool rebuild_buckets = true;
  BucketPlan bucket_plan = BucketPlan::timed;
  /// BucketPlan::timed: how many synchronised backwards after the first are
  /// timed before the plan (the first one pays for first-time set-up). Fewer
  /// when the comm hook keeps per-bucket state earlier (PowerSGD from
  /// start_powerSGD_iter): the last cut comes before the state starts.
  int64_t timed_plan_steps = 3;
  /// BucketPlan::timed: the planner's options (max_bucket_bytes comes from
  /// bucket_cap_mb).
  BucketPlanOptions plan{};
};

/// Groups parameters into buckets: `order` lists parameter indices in the order
/// they are visited (reverse registration order at first); each (dtype, device)
/// key fills its own bucket, closed once it holds >= its limit (the first
/// bucket of each key `first_cap_bytes`, later ones `cap_bytes`). Buckets are
/// returned sorted by the position in `order` of their first parameter.
std::vector<std::vector<size_t>> compute_bucket_assignment(const std::vector<Tensor>& params,
                                                           const std::vector<size_t>& order,
                                                           size_t first_cap_bytes,
                                                           size_t cap_bytes);

/// One timeline event, in microseconds since the reducer was made.
struct TimelineEvent {
  std::string name;                 ///< "forward", "backward", "allreduce"
  double begin_us = 0, end_us = 0;  ///< allreduce: launched (bucket ready) .. finished
  int64_t bucket = -1;              ///< allreduce: the bucket index
  int64_t bytes = 0;                ///< allreduce: payload bytes of the bucket's collectives
  double start_us = -1;             ///< allreduce: when the backend began it (-1: unknown)
};

/// What one synchronised step did.
struct StepStats {
  int64_t step = 0;
  int64_t num_buckets = 0;
  double backward_s = 0;  ///< first gradient ready -> end of backward
  double comm_s = 0;      ///< union of the all-reduces' [launch, done] intervals
  double hidden_s = 0;    ///< the part of comm_s that overlapped backward
  double exposed_s = 0;   ///< the rest: comm after backward ended (comm_s - hidden_s)
  double wait_s = 0;      ///< time the end-of-backward callback blocked on comm
  /// Collectives the comm hook issued for the buckets, and their payload bytes
  /// (ProcessGroup::stats(); SyncBatchNorm's and the buffers' are not counted).
  int64_t collectives = 0;
  int64_t bytes = 0;
  /// The buckets' own bytes: what the default all-reduce moves.
  int64_t bucket_bytes = 0;
};

class Reducer {
 public:
  /// params: the module's named parameters that require grad.
  Reducer(nn::StateDict params, std::shared_ptr<ProcessGroup> group, ReducerOptions opts = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  /// Called by DDP before forward: rebuilds buckets once if due, and makes every
  /// parameter's .grad a view of its bucket (zeros where it had none).
  void prepare_for_forward();
  /// Called by DDP after a forward with grad enabled: arms the hooks for the
  /// next backward. With find_unused_parameters, `outputs` are traversed and
  /// the parameters they do not reach are marked ready at once.
  void prepare_for_backward(const std::vector<Tensor>& outputs);
  /// Whether the next backward all-reduces (false under DDP::no_sync()).
  void set_require_sync(bool sync) { require_sync_ = sync; }
  bool require_sync() const { return require_sync_; }
  /// Replaces the default all-reduce with `hook` (null: back to the default).
  /// Only before the first backward.
  void set_comm_hook(std::shared_ptr<CommHook> hook);
  /// The registered hook (null: the default all-reduce).
  const std::shared_ptr<CommHook>& comm_hook() const { return hook_; }

  // ---- introspection (tests, reports) ----
  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }
  /// Parameter indices (into the constructor's list) of bucket b.
  const std::vector<size_t>& bucket_params(int64_t b) const { return buckets_[b].params; }
  /// The flat gradient buffer of bucket b.
  const Tensor& bucket_buffer(int64_t b) const { return buckets_[b].buffer; }
  /// Bucket indices in the order their all-reduces were launched, last backward.
  const std::vector<int64_t>& launch_order() const { return launch_order_; }
  /// Parameter indices in the order they became ready, last backward.
  const std::vector<size_t>& ready_order() const { return ready_order_; }
  bool buckets_rebuilt() const { return rebuilt_; }
  /// Whether the buckets have been cut by the timed plan.
  bool buckets_planned() const { return planned_; }
  const StepStats& last_stats() const { return stats_; }
  /// When each parameter's gradient became ready in the last synchronised
  /// backward, on the timeline's clock (-1: not ready).
  const std::vector<double>& param_ready_us() const { return ready_us_; }
  /// The all-reduce cost fitted on the group when the buckets were planned
  /// (BucketPlan::timed), else nullopt.
  const std::optional<AllReduceCost>& allreduce_cost() const { return cost_; }
  /// First gradient ready and end of the last synchronised backward (timeline clock).
  double backward_begin_us() const { return bwd_begin_us_; }
  double backward_end_us() const { return bwd_end_us_; }
  const nn::StateDict& params() const { return params_; }
  /// Timeline events of the last synchronised step (forward is added by DDP).
  const std::vector<TimelineEvent>& timeline() const { return events_; }
  void add_event(TimelineEvent e) { events_.push_back(std::move(e)); }
  /// Microseconds since construction (the timeline's clock).
  double now_us() const;

 private:
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;  // element offset of each param in buffer
    Tensor buffer;                 // (numel) flat gradients
    int64_t pending = 0;
    CommFuturePtr future;                // the hook's result, this step
    int64_t collectives = 0, bytes = 0;  // what the hook issued for it, this step
    double launch_us = 0, start_us = -1, done_us = -1;
  };

  void build_buckets(const std::vector<std::vector<size_t>>& assignment);
  void ensure_grad_view(size_t i);
  void on_grad_ready(size_t i);
  void mark_ready(size_t i);
  void launch_ready_buckets();
  void launch(int64_t b);
  void issue_collectives_before(int64_t b);
  // Runs fn (which drives bucket b's future) and counts what it issued.
  template <typename F>
  void counted(int64_t b, F&& fn);
  // counted(), for steps that must not start collectives (a named error if they do).
  template <typename F>
  void local_steps(int64_t b, F&& fn);
  void poll_done();
  void record_done(Bucket& b);
  void finalize();
  void rebuild();
  AllReduceCost calibrate();
  bool plans_buckets() const;
  int64_t timed_steps() const;
  std::vector<std::vector<size_t>> planned_assignment(const std::vector<size_t>& order,
                                                      const AllReduceCost& cost) const;
  double to_us(std::chrono::steady_clock::time_point t) const;
  void reset_pending();

  nn::StateDict params_;
  std::vector<int> hook_ids_;
  std::shared_ptr<ProcessGroup> group_;
  ReducerOptions opts_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<int64_t, int64_t>> where_;  // param -> (bucket, position in bucket)
  std::vector<uint8_t> ready_;
  std::vector<size_t> ready_order_;
  std::vector<double> ready_us_;
  std::vector<std::vector<double>> ready_history_;  // per parameter, from backward's start (s)
  std::optional<AllReduceCost> cost_;
  std::vector<int64_t> launch_order_;
  int64_t next_launch_ = 0;
  int64_t issued_ = 0;  // buckets before this one have issued all their collectives
  std::shared_ptr<CommHook> hook_;
  std::shared_ptr<CommHook> default_hook_;
  bool backward_seen_ = false;
  bool require_sync_ = true;
  bool expect_hooks_ = false;
  bool sync_backward_ = true;  // require_sync_ as it was at forward (no_sync scope)
  bool callback_queued_ = false;
  bool rebuilt_ = false;
  bool planned_ = false;
  bool rebuild_due_ = false;
  int64_t syncs_ = 0;
  double bwd_begin_us_ = -1, bwd_end_us_ = 0;
  StepStats stats_;
  std::vector<TimelineEvent> events_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace tcv::dist
