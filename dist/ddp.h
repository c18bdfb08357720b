// DistributedDataParallel: wraps a Module so that backward all-reduces the
// gradients across a process group while it runs (see dist/reducer.h), after
// checking that every rank holds the same model and broadcasting rank 0's
// parameters and buffers. A communication hook (register_comm_hook) can
// replace the all-reduce: compression to bf16/fp16, PowerSGD.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/reducer.h"
#include "layers/module.h"
#include "layers/sync_batch_norm.h"

namespace tcv::dist {

struct DDPOptions {
  /// The gradient buckets: their sizes, how they are cut after the first
  /// backward, unused parameters (dist/reducer.h).
  ReducerOptions reducer{};
  /// Broadcast rank 0's buffers (BatchNorm running statistics) at each forward.
  bool broadcast_buffers = true;
  /// Rank 0 writes one step's Chrome trace here ("" = the TCV_TIMELINE
  /// environment variable, unset = none).
  std::string timeline_path{};
  /// Which synchronised step (1-based) the timeline records (TCV_TIMELINE_STEP, default 3).
  int64_t timeline_step = 0;
  /// Record this many synchronised steps from timeline_step on and write the
  /// one of median length, a step typical of the run (TCV_TIMELINE_STEPS,
  /// default 1).
  int64_t timeline_steps = 0;
};

class DistributedDataParallel : public nn::Module {
 public:
  /// Checks that all ranks hold the same parameter and buffer names, shapes and
  /// dtypes (the error names the first mismatch), broadcasts rank 0's values,
  /// and sets up the reducer. Collective: every rank must construct it.
  DistributedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> group,
                          DDPOptions opts = {});

  /// Runs the module; with grad enabled, the next backward all-reduces.
  Tensor forward(const Tensor& x) override;
  /// Runs fn(module()) as one forward with several outputs (a detector's box
  /// and class scores, a segmentation model's main and auxiliary logits), as
  /// forward() runs the module: the backward of those outputs all-reduces.
  std::vector<Tensor> forward_with(const std::function<std::vector<Tensor>(nn::Module&)>& fn);
  std::string type_name() const override { return "DistributedDataParallel"; }
  void train(bool on = true) override;

  nn::Module& module() { return *module_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  Reducer& reducer() { return *reducer_; }

  /// Makes `hook` reduce each bucket of gradients instead of the default
  /// all-reduce (PyTorch's register_comm_hook; built-in hooks in
  /// dist/comm_hook.h: allreduce_hook, bf16_compress_hook, fp16_compress_hook,
  /// powersgd_hook). Before the first backward, at most once; every rank
  /// registers the same hook.
  void register_comm_hook(std::shared_ptr<CommHook> hook);
  /// The same with a function: `fn(group, bucket)` returns the bucket's future.
  void register_comm_hook(std::string name, CommHookFn fn);
  ProcessGroup& group() { return *group_; }
  const DDPOptions& options() const { return opts_; }

  /// Gradient accumulation: the backward of a forward run while the guard lives
  /// only accumulates locally (the guard must cover the forward, as in PyTorch);
  /// the next synchronised backward all-reduces the sum.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp)
        : reducer_(ddp.reducer()), prev_(reducer_.require_sync()) {
      reducer_.set_require_sync(false);
    }
    ~NoSyncGuard() { reducer_.set_require_sync(prev_); }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    Reducer& reducer_;
    bool prev_;
  };
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  /// Writes the last synchronised step's timeline as Chrome trace JSON (the
  /// step's span ends now: call it before the next forward).
  void write_timeline(const std::string& path) const;

 private:
  void verify_same_model();
  void broadcast_state(bool params);

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> group_;
  DDPOptions opts_;
  std::unique_ptr<Reducer> reducer_;
  int64_t forwards_ = 0;
  // The last synchronised step's trace as JSON text, and its length.
  std::string timeline_text(double& step_ms) const;

  bool timeline_written_ = false;
  std::vector<std::pair<double, std::string>> timeline_candidates_;  // (step ms, trace)
};

/// The group SyncBatchNorm reduces over (nn::convert_sync_batchnorm), over `group`.
std::shared_ptr<nn::SyncBNGroup> sync_bn_group(std::shared_ptr<ProcessGroup> group);

/// A short alias, as torch.nn.parallel.DistributedDataParallel is usually imported.
using DDP = DistributedDataParallel;

}  // namespace tcv::dist
