// Communication hooks: what DistributedDataParallel does with a bucket of
// gradients once they are all ready, as PyTorch DDP's register_comm_hook. A
// hook gets the bucket (GradBucket: its flat buffer and the parameters in it)
// and returns a CommFuture: the collectives it started and the steps that
// follow them (decompress, the next collective of a chain), whose completion
// leaves the averaged gradient in the bucket's buffer.
//
// Built in: allreduce (the default), bf16 and fp16 compression
// (bf16_compress_hook / fp16_compress_hook) and PowerSGD (powerSGD_hook with
// its PowerSGDState), with PyTorch 1.13's semantics.
//
// Order: collectives must be issued in the same order on every rank. The
// reducer calls hooks in bucket index order, and runs a hook's
// then_collective() steps (the ones that start collectives) only at points
// that are the same on every rank: when the next bucket launches, and at the
// end of backward. then() steps (local work) run whenever their collective has
// finished. So a chain such as PowerSGD's (P, then Q) keeps one order on
// every rank even beside SyncBatchNorm's collectives on the same group.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dist/process_group.h"

namespace tcv::dist {

/// One bucket of gradients as a hook sees it (PyTorch's dist.GradBucket).
class GradBucket {
 public:
  GradBucket(int64_t index, Tensor buffer, std::vector<std::string> names,
             std::vector<Shape> shapes, std::vector<int64_t> offsets, bool is_last);
  /// The bucket's position: buckets are launched in index order, 0 first.
  int64_t index() const { return index_; }
  /// The flat (numel) gradients of the bucket's parameters, each at its offset.
  /// The hook's result (the average over the ranks) must end up here.
  const Tensor& buffer() const { return buffer_; }
  /// Per parameter in the bucket: its name, shape and element offset in buffer().
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<Shape>& shapes() const { return shapes_; }
  const std::vector<int64_t>& offsets() const { return offsets_; }
  int64_t num_parameters() const { return static_cast<int64_t>(names_.size()); }
  /// The gradients as views of buffer(), in the parameters' shapes.
  std::vector<Tensor> gradients() const;
  /// True for the bucket launched last in a step (PyTorch's is_last()).
  bool is_last() const { return is_last_; }

 private:
  int64_t index_;
  Tensor buffer_;
  std::vector<std::string> names_;
  std::vector<Shape> shapes_;
  std::vector<int64_t> offsets_;
  bool is_last_;
};

/// A Work that finishes when every one of `works` has (null entries are skipped).
WorkPtr when_all(std::vector<WorkPtr> works);

/// The asynchronous result of a hook, as torch.futures.Future with then(): a
/// collective in flight, followed by steps that run (on the thread that polls
/// or waits) once the one before has finished. A step made with
/// then_collective() may start the next collective and returns its Work.
/// Not thread-safe: one thread drives it (DDP's backward thread).
class CommFuture final : public Work {
 public:
  /// `first`: the collective started by the hook (null: none, the next step may run at once).
  explicit CommFuture(WorkPtr first = nullptr);
  /// A future with no collective and no steps: complete.
  static std::shared_ptr<CommFuture> completed() { return std::make_shared<CommFuture>(); }

  /// Appends a step that starts a collective: fn runs after the previous step
  /// finished and returns the Work of what it started (null: nothing).
  CommFuture& then_collective(std::function<WorkPtr()> fn);
  /// Appends a local step (decompress, copy back); it must not start collectives.
  CommFuture& then(std::function<void()> fn);

  /// True once no then_collective() step is left to run.
  bool collectives_issued() const { return collective_steps_left_ == 0; }
  /// Runs the steps, blocking on their collectives, until no then_collective()
  /// step is left (later local steps are not run).
  void issue_collectives();
  /// Runs the local steps whose collective has finished, without blocking;
  /// stops before a then_collective() step. True when the future is complete.
  bool poll();
  /// Runs every remaining step, blocking on each collective. Throws the
  /// collective's error (every later call throws it again).
  void wait() override;
  /// All steps run and the last collective finished.
  bool is_completed() override;
  /// When the backend began the first of its collectives, and finished the
  /// last one seen finished ({} where the backend does not say).
  std::chrono::steady_clock::time_point started_at() override;
  std::chrono::steady_clock::time_point finished_at() override;
  /// Drops the steps not yet run and waits for the collective in flight,
  /// ignoring its error: for destructors and error paths, where starting
  /// more collectives could hang.
  void abandon() noexcept;

 private:
  struct Step {
    std::function<WorkPtr()> fn;
    bool collective = false;
  };
  // Runs the front step once the current collective has finished (blocking
  // when `block`); false when it would have to wait.
  bool step(bool block);

  // Notes the backend's times of a finished collective.
  void note_times(Work& w);

  WorkPtr current_;
  std::chrono::steady_clock::time_point started_{}, finished_{};
  std::deque<Step> steps_;
  int64_t collective_steps_left_ = 0;
  std::string error_;
};

using CommFuturePtr = std::shared_ptr<CommFuture>;

/// A communication hook (PyTorch's hook and its state in one object).
class CommHook {
 public:
  virtual ~CommHook() = default;
  /// Starts reducing `bucket` over `group`. Called once per bucket per
  /// synchronised backward, in bucket index order, as soon as the bucket's
  /// gradients are all ready; the future's completion leaves the gradient the
  /// optimizer is to see (the average over the ranks) in bucket.buffer().
  virtual CommFuturePtr run(ProcessGroup& group, const GradBucket& bucket) = 0;
  /// A short name for logs ("allreduce", "bf16", "powersgd rank 4", ...).
  virtual std::string name() const = 0;
  /// The first synchronised step (0-based) from which the hook keeps state per
  /// bucket index (PowerSGD's error feedback and warm-start Q): the reducer
  /// cuts its buckets for the last time before it. Default: never.
  virtual int64_t keeps_bucket_state_from() const { return INT64_MAX; }
};

using CommHookFn = std::function<CommFuturePtr(ProcessGroup&, const GradBucket&)>;

/// A hook from a function (state captured by the lambda). A lambda that keeps
/// per-bucket state, or wraps a hook that does, says from which step
/// (CommHook::keeps_bucket_state_from).
std::shared_ptr<CommHook> make_comm_hook(std::string name, CommHookFn fn,
                                         int64_t keeps_bucket_state_from = INT64_MAX);

/// The default: all-reduce the bucket in its own dtype, averaged (ReduceOp::avg).
std::shared_ptr<CommHook> allreduce_hook();
/// PyTorch's fp16_compress_hook: cast the bucket to f16, divide by the world
/// size (in f16, before the sum, as PyTorch does), all-reduce the sum, copy
/// back into the bucket's dtype. Half the bytes of f32.
std::shared_ptr<CommHook> fp16_compress_hook();
/// PyTorch's bf16_compress_hook: the same in bf16 (f32's range, 8 bits of mantissa).
std::shared_ptr<CommHook> bf16_compress_hook();

/// PyTorch's PowerSGDState hyperparameters (same names and defaults).
struct PowerSGDOptions {
  /// Rank r of the approximation M ~ P Q^T (per tensor, at most min(n, m)).
  int64_t matrix_approximation_rank = 1;
  /// Plain all-reduce (divided by the world size first) for the first
  /// start_powerSGD_iter synchronised steps; > 1 when error feedback or warm
  /// start is on (DDP's buckets are rebuilt after the first step).
  int64_t start_powerSGD_iter = 1000;
  /// A tensor (viewed as n x m, n its first dim) is compressed only when
  /// (n + m) r * min_compression_rate < n m; the others are all-reduced as they are.
  double min_compression_rate = 2.0;
  /// Add the last step's compression error (per rank) to the gradient first.
  bool use_error_feedback = true;
  /// Start each step's power iteration from the last step's Q.
  bool warm_start = true;
  /// Added to each column's norm in Gram-Schmidt (0: none).
  double orthogonalization_epsilon = 0.0;
  /// Seeds the random initial Qs, the same on every rank.
  uint64_t random_seed = 0;
};

/// PowerSGD (Vogels et al. 2019) as PyTorch 1.13's powerSGD_hook, per bucket:
/// error feedback added, tensors split into those worth compressing (viewed
/// as n x m matrices M, grouped by shape in order of first appearance, as
/// PyTorch orders them) and the rest; P = M Q from the last step's Q
/// (orthogonalised; warm start) or a seeded random one; the rest and the P's
/// all-reduced (one flat buffer each, sums), P orthogonalised (Gram-Schmidt),
/// Q = M^T P, the Q's all-reduced and divided by the world size, M = P Q^T;
/// the error (input - result) kept for the next step. The rest is divided by
/// the world size after its sum, as PyTorch does. PyTorch orthogonalises
/// with QR above rank 2; Gram-Schmidt here at every rank (the same P Q^T:
/// the columns differ by their signs at most).
class PowerSGDHook final : public CommHook {
 public:
  explicit PowerSGDHook(PowerSGDOptions opts = {});
  CommFuturePtr run(ProcessGroup& group, const GradBucket& bucket) override;
  std::string name() const override;
  int64_t keeps_bucket_state_from() const override { return opts_.start_powerSGD_iter; }
  const PowerSGDOptions& options() const { return opts_; }

  // ---- state (PyTorch's PowerSGDState), for tests and logs ----
  /// Synchronised steps seen (incremented after the last bucket's step).
  int64_t iter() const { return iter_; }
  /// Per bucket index: the error of its last compressed step, its P's and Q's
  /// (flat, in the order described above); undefined before the first.
  Tensor error(int64_t bucket) const;
  Tensor p_memory(int64_t bucket) const;
  Tensor q_memory(int64_t bucket) const;
  /// Elements before and after compression, summed over compressed steps.
  int64_t numel_before_compression() const { return numel_before_; }
  int64_t numel_after_compression() const { return numel_after_; }

 private:
  struct Memory {
    Tensor error, p, q;
  };
  std::shared_ptr<Memory> memory(int64_t bucket);

  PowerSGDOptions opts_;
  std::mt19937_64 rng_;
  std::vector<std::shared_ptr<Memory>> memory_;  // by bucket index (steps hold them)
  int64_t iter_ = 0;
  int64_t numel_before_ = 0, numel_after_ = 0;
};

std::shared_ptr<PowerSGDHook> powersgd_hook(PowerSGDOptions opts = {});

/// Gram-Schmidt on the columns of the (n, r) matrix `m` in place, as PyTorch's
/// _orthogonalize_gram_schmidt: each column divided by its norm (+ epsilon),
/// then removed from the columns after it.
void orthogonalize_(Tensor& m, double epsilon = 0.0);

/// The names network.comm_hook takes: none, bf16, fp16, powersgd.
const std::vector<std::string>& comm_hook_names();
/// The built-in hook of that name (null for "none": DDP's default all-reduce);
/// `powersgd` configures "powersgd". Throws naming the valid names.
std::shared_ptr<CommHook> make_builtin_comm_hook(const std::string& name,
                                                 const PowerSGDOptions& powersgd = {});

}  // namespace tcv::dist
