// The training loop behind tcv-train: one loop for every task (train/task.h:
// classification, detection, segmentation) with the optimizer, LR policy,
// mixed precision, data parallelism, evaluation, logging (metrics.jsonl +
// progress + report.html) and checkpoints.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>

#include "engine/value.h"
#include "layers/module.h"
#include "train/config.h"

namespace tcv::train {

enum class ProgressMode : uint8_t {
  automatic,  ///< a redrawn bar when stdout is a terminal, plain lines otherwise
  bar,
  lines,
  quiet,
};

/// What Trainer::run does: train (and evaluate as the config says), or only
/// evaluate the checkpoint network.resume names (TorchCV's --phase test).
enum class Phase : uint8_t { train, test };

struct TrainOptions {
  Phase phase = Phase::train;
  /// Phase::test: evaluates this results file (detection: COCO results JSON,
  /// pycocotools' loadRes format) against the val split instead of a model.
  std::string results{};
  /// Run directory: receives config.toml, metrics.jsonl, report.html and checkpoints/.
  std::string out_dir = "runs/default";
  ProgressMode progress = ProgressMode::automatic;
  /// Where progress and log lines go (null = nowhere).
  std::ostream* log = nullptr;
  /// Stops once `iter` reaches this (saving `latest`, without the final
  /// evaluation), as an interruption would; 0 = run to the end. For resume tests.
  int64_t stop_at_iter = 0;
};

/// What a run did.
struct TrainSummary {
  int64_t epochs = 0;                  ///< epochs completed in all
  int64_t iters = 0;                   ///< iterations completed in all
  int64_t start_iter = 0;              ///< where this run began (> 0 when resumed)
  Value val;                           ///< the last evaluation's metrics (its val row)
  std::string best_metric;             ///< the task's metric that picks `best`
  double score = -1, best_score = -1;  ///< its last and best values
  /// The val row's "loss" (-1 when it has none).
  double val_loss = -1;
  /// `key` of the last evaluation's row (top1, map, miou, ...), -1 when the
  /// row has no such number.
  double metric(const std::string& key) const {
    return val.is_object() && val.contains(key) && val.at(key).is_number() ? val.at(key).as_double()
                                                                           : -1.0;
  }
  double wall_s = 0;  ///< this run's wall time
  double train_images_per_sec = 0;
  int64_t skipped = 0;  ///< corrupt images skipped (data.skip_corrupt), train and val
  /// Steps dropped for a loss or gradient with inf or NaN (solver.nonfinite =
  /// "skip"), over all runs of a resumed training.
  int64_t nonfinite_skipped = 0;
};

/// Trains a model of the config's task as `cfg` says (cfg is validated first).
///
/// Iterations count from 1, and so do epochs in metrics.jsonl and the log
/// ("epoch": 1 is the first epoch); `solver.display_iter` logs a training line every N
/// iterations, `solver.test_interval` evaluates on the whole test split every N
/// iterations (0: after each epoch, and always at the end). Checkpoints in
/// out_dir/checkpoints: `latest` after each epoch and at the end, `best` by the
/// task's metric (top-1, mAP, mIoU; never from a val row whose loss is not
/// finite or that evaluated no image), `epoch_NNNN` every `solver.save_epoch` epochs (the last
/// `checkpoints.keep_last` kept). `network.resume` continues a run exactly
/// where its checkpoint stands (same batches, LR and random stream): on the CPU,
/// to the bit; it refuses, before any step, a checkpoint that does not load
/// (truncated, another model, other shapes, a bad trainer state), and drops the
/// lines of metrics.jsonl after the checkpoint's iteration, so each iteration
/// is logged once. report.html is rewritten after each evaluation.
///
/// A loss or gradient holding inf or NaN (f32, bf16) stops the run with an
/// error naming the iteration and the first parameter whose gradient is not
/// finite, before the update and before any save (solver.nonfinite = "stop"),
/// or drops that step, BatchNorm statistics included, and counts it
/// (solver.nonfinite = "skip"). Under f16 the loss scaler skips steps with
/// inf/NaN gradients as before. A checkpoint is never written from weights
/// that hold inf or NaN.
class Trainer {
 public:
  /// Reads the data, builds the model and, to resume or to test, loads the
  /// checkpoint: every error of the config or the checkpoint comes here.
  Trainer(Config cfg, TrainOptions opts);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Phase::train: trains. Phase::test: evaluates the checkpoint on the val
  /// split with the task's test settings, as a training run's evaluation does
  /// (the same row, printed and written to metrics.jsonl with "split": "test",
  /// and report.html); ranks split the images. Nothing is trained or saved.
  /// With TrainOptions::results, the results file is evaluated instead.
  TrainSummary run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class Optimizer;
/// The optimizer a config asks for (solver.optim.*), over `params`.
std::unique_ptr<Optimizer> make_optimizer(const Config& cfg, const nn::StateDict& params);

}  // namespace tcv::train
