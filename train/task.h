// The task seam of tcv-train: what classification, detection, segmentation and pose
// plug into one training loop. The config key `task` ("cls" | "det" | "seg" | "pose",
// TorchCV's name) picks a Task, which supplies
//
//   - its data: loaders of batches (images with labels, boxes or masks),
//   - its model, built from network.model_name and the task's own keys,
//   - its loss of one batch, from as many model outputs as it needs,
//   - its evaluator: accumulate on each rank, combine across ranks, finish
//     into the val row of metrics.jsonl, with the metric that picks `best`,
//   - what report.html draws and what tcv-predict writes.
//
// The loop (train/trainer.cpp) owns everything else: epochs and iterations,
// mixed precision, data parallelism, LR policies, non-finite checks,
// checkpoints and logging. It never asks which task it runs; each task lives
// in its own files (train/tasks/), with its config keys in its own tables.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/image.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/tensor.h"
#include "engine/value.h"
#include "layers/module.h"
#include "models/registry.h"
#include "train/config.h"
#include "train/eval/evaluator.h"
#include "train/metrics.h"

namespace tcv::dist {
class DistributedDataParallel;
}

namespace tcv::train {

struct ReportInputs;
struct ReportFigure;

/// A batch as a task's loader assembled it, on the host. Only the task that
/// made it looks inside (each task downcasts to its own batch type).
class TaskBatch {
 public:
  virtual ~TaskBatch() = default;
  /// Images in the batch; 0 when every image of it was skipped as corrupt
  /// (data.skip_corrupt), and the loop then takes no step.
  virtual int64_t images() const = 0;
};

/// The batches of one split, for this process's share of it.
class TaskLoader {
 public:
  virtual ~TaskLoader() = default;
  /// Batches per epoch.
  virtual int64_t num_batches() const = 0;
  /// Images in the split (every rank's).
  virtual int64_t size() const = 0;
  /// The data set the split reads (its annotation file, list or directory),
  /// for messages; "" when it has no name of its own.
  virtual std::string name() const { return ""; }
  /// Images skipped as corrupt so far (data.skip_corrupt), and the first of
  /// them with the reason ("" when none).
  virtual int64_t skipped() const = 0;
  virtual std::string first_skipped() const = 0;
  /// Starts `epoch` at its batch `skip` (a resumed run), stopping any epoch in
  /// progress.
  virtual void start_epoch(int64_t epoch, int64_t skip) = 0;
  /// The next batch of the epoch, or null once it is done. The batch stays
  /// valid until the next call.
  virtual const TaskBatch* next() = 0;
};

/// A task's loaders for one run.
struct TaskData {
  std::unique_ptr<TaskLoader> train, val;
  /// For the start-up line, e.g. "60000 train / 10000 val images (fashion_mnist, 1x28x28)".
  std::string summary;
};

/// The model a training step runs: the task's own model, called through
/// DistributedDataParallel when the run is data-parallel so that backward
/// all-reduces the gradients.
class StepModel {
 public:
  StepModel(nn::Module& model, dist::DistributedDataParallel* ddp) : model_(model), ddp_(ddp) {}
  /// The model itself, to reach a task model's own methods in `fn` below.
  nn::Module& module() { return model_; }
  /// The model's forward.
  Tensor forward(const Tensor& x);
  /// Runs `fn` on the model as one forward with several outputs (SSD's
  /// locations and scores, a segmentation model's main and auxiliary logits).
  std::vector<Tensor> forward_with(const std::function<std::vector<Tensor>(nn::Module&)>& fn);

 private:
  nn::Module& model_;
  dist::DistributedDataParallel* ddp_;
};

/// What the loop tells a task about the step whose loss it computes.
struct StepContext {
  Device device;
  int64_t iter = 0;   ///< iterations done before this step
  uint64_t seed = 0;  ///< the config's seed
  int64_t world = 1;  ///< processes training together (data-parallel), each with its batch
  /// The sum of `v` over those processes (v itself when alone); every process
  /// must call it as often.
  std::function<double(double)> sum_over_ranks = [](double v) { return v; };

  /// A loss that this rank divided by a count of its own batch (`local`:
  /// matched boxes, labelled pixels, images), divided instead by that count
  /// over the global batch and scaled by `world` (DDP averages the gradients):
  /// loss · local · world / global, both counts at least `floor`. So a
  /// data-parallel step follows the gradient one process would on the global
  /// batch, whatever each rank's share of the count. Alone: the loss as it is.
  /// Collective (sum_over_ranks) when world > 1.
  Tensor global_normalized(const Tensor& loss, double local, double floor) const;
};

/// One evaluation: runs the model on the val batches this rank gets,
/// accumulates, merges the other ranks' state (Evaluator's serialize / merge),
/// and finishes into the metrics of the val row.
///
/// What every task's evaluation shares lives here: the val loss meter, which
/// rank owns which image (the val sampler pads the last ranks' shares with the
/// first images; each counts on rank index mod world), the framing of the
/// state that the ranks exchange, the row's loss and image count, and the
/// figures report.html shows. A task's evaluator keeps only its metric: its
/// state (reset_metric, write_metric, read_metric), its row, its report.
class TaskEvaluator : public Evaluator {
 public:
  /// `what` names the evaluator in errors about its state ("detection
  /// evaluator"); this process is rank `rank` of `world`; `figures_title`
  /// heads the figures in report.html ("" keeps the report's default).
  explicit TaskEvaluator(std::string what, int64_t rank = 0, int64_t world = 1,
                         std::string figures_title = "");
  ~TaskEvaluator() override;
  /// Runs `model` (in eval mode, autograd off) on one val batch on `device` and
  /// accumulates what it finds.
  virtual void add(nn::Module& model, const TaskBatch& batch, Device device) = 0;
  void reset() final;
  /// The loss meter, then the task's state (write_metric).
  std::string serialize() const final;
  void merge(const std::string& bytes) final;
  /// The val row's metrics (after "split", "epoch", "iter"): the task's
  /// metrics, "loss" (none for a results file), "images", then the task's
  /// details (fill_row); must hold the task's best_metric().
  Value row() const;
  /// The log line's words for the row, e.g. "top1 81.20% top5 99.10% loss 0.5123".
  virtual std::string describe(const Value& row) const = 0;
  /// Fills what report.html shows of the task: its headline and charts
  /// (report_metric), and the figures this process kept of the evaluation.
  void fill_report(ReportInputs& report) const;
  /// A table printed after the line when there is one (detection's COCO
  /// metric: COCOeval.summarize()'s twelve lines).
  virtual std::string table() const { return ""; }
  /// The predictions as results files (name, contents) for the test phase's
  /// run directory: detection's COCO results JSON, pose's keypoint results.
  virtual std::vector<std::pair<std::string, std::string>> results_files() const { return {}; }
  /// The test phase: write this rank's predictions under `dir` as they are
  /// made, one file per image (segmentation's label PNGs); before add().
  /// Whether the task does.
  virtual bool write_predictions_to(const std::string& /*dir*/) { return false; }

 protected:
  /// Whether this rank counts the val image at data set index `index`.
  bool owned(int64_t index) const { return world_ == 1 || index % world_ == rank_; }
  /// Adds a batch's mean loss, weighted by the images of `indices` this rank owns.
  void add_owned_loss(const Tensor& loss, const std::vector<int64_t>& indices);
  /// The val loss meter (a task with its own weighting adds to it directly).
  AverageMeter& loss_meter() { return loss_; }
  const AverageMeter& loss_meter() const { return loss_; }
  /// The evaluation reads a results file (tcv-train --results): no loss.
  void mark_from_results() { from_results_ = true; }
  /// The log line of a row: "<key> <value>" for each of `keys` (%.4f, nan
  /// for null), " loss <value>" when it has one, then " (<setting>, <n>
  /// images)", e.g. "map 0.5012 ap50 0.7421 loss 2.1034 (voc07, 500 images)".
  static std::string row_words(const Value& row, const std::vector<std::string>& keys,
                               const std::string& setting);
  /// Whether another figure is wanted for the report, and keeping one.
  bool wants_figure() const;
  void keep_figure(ReportFigure figure);

  /// The task's metric state: forget it, write it, add another rank's.
  virtual void reset_metric() = 0;
  virtual void write_metric(ByteWriter& w) const = 0;
  virtual void read_metric(ByteReader& r) = 0;
  /// The row's metrics, before "loss" (objects, filled in order), and what it
  /// holds after "images" (per-class values, counts).
  virtual void fill_row(Value& metrics, Value& details) const = 0;
  /// The row's "images": the val images evaluated (every rank's once merged).
  virtual int64_t images() const = 0;
  /// The report's headline and charts (and samples).
  virtual void report_metric(ReportInputs& report) const = 0;

 private:
  std::string what_;
  int64_t rank_, world_;
  std::string figures_title_;
  AverageMeter loss_;
  bool from_results_ = false;
  std::vector<ReportFigure> figures_;
};

/// How tcv-predict's output is shaped.
struct PredictOptions {
  /// Classification: classes listed per image.
  int64_t top = 5;
  /// Where pictures go (detection: boxes drawn; segmentation: overlays and
  /// label PNGs); "" writes none.
  std::string out_dir{};
  /// Segmentation: what the raw label PNGs hold.
  enum class LabelIds : uint8_t {
    train,       ///< the classes the model predicts (train ids)
    cityscapes,  ///< Cityscapes label ids (0..33), as its benchmark's submissions
  } label_ids = LabelIds::train;
  /// Detection: the score from which boxes are printed and drawn; < 0: res.vis_conf_thre.
  double score_threshold = -1;
};

/// tcv-predict for one task: a trained model applied to image files.
class TaskPredictor {
 public:
  virtual ~TaskPredictor() = default;
  /// How images are read for this model (gray or RGB).
  virtual data::ImageMode image_mode() const = 0;
  /// The checkpoint's stem (what --checkpoint resolved to).
  virtual const std::string& checkpoint() const = 0;
  /// Predicts one u8 image (C, H, W) named `name` (its path; `label` its
  /// class when known, else -1): returns the JSON entry of --json (without
  /// "input") and writes the pictures options say.
  virtual Value predict(const Tensor& image, const std::string& name, int64_t label) = 0;
  /// The text output for one entry.
  virtual void print(std::ostream& os, const std::string& name, const Value& entry) const = 0;
};

/// A task: one of tcv-train's kinds of training (see the top of this file).
class Task {
 public:
  virtual ~Task() = default;
  /// The loaders of rank `rank`'s share of each split (of `world` ranks).
  virtual TaskData make_data(int64_t rank, int64_t world) = 0;
  /// The model to train, on the CPU, freshly initialised.
  virtual std::shared_ptr<nn::Module> make_model() = 0;
  /// The training loss of one batch, forward included: an f32 scalar on
  /// ctx.device, computed under the loop's autocast.
  virtual Tensor loss(StepModel& model, const TaskBatch& batch, const StepContext& ctx) = 0;
  /// An empty evaluator for one pass over the val split.
  virtual std::unique_ptr<TaskEvaluator> make_evaluator() = 0;
  /// An evaluator holding the detections of a results file (tcv-train
  /// --results) against the val split's ground truth, after make_data; null
  /// when the task has no results format.
  virtual std::unique_ptr<TaskEvaluator> evaluate_results(const std::string& /*file*/) {
    return nullptr;
  }
  /// The val metric that picks the `best` checkpoint (higher is better):
  /// "top1", "map", "miou", "ap".
  virtual std::string best_metric() const = 0;
  /// tcv-predict's side: the model of `checkpoint` (a file, stem or run
  /// directory), on the CPU in eval mode.
  virtual std::unique_ptr<TaskPredictor> make_predictor(const std::string& checkpoint,
                                                        const PredictOptions& opts) = 0;
};

/// A data set a task reads: one value of data.dataset.
struct DatasetInfo {
  std::string name;
  /// One line for tcv-train --list-datasets.
  std::string description;
  /// The keys that must be set with this data set (check_dataset).
  std::vector<std::string> required = {};
  /// What the task builds it from, in the task's own type (classification:
  /// ClsDatasetSource, train/data_setup.h); empty where the task reads it itself.
  std::any source = {};
};

/// What tcv-train knows of a task before it builds one.
struct TaskInfo {
  std::string name;
  std::string description;
  /// The values of data.dataset, the first one the task's example.
  std::vector<DatasetInfo> datasets = {};
  /// The config keys only this task reads: its tables. A key may belong to
  /// several tasks (declared by each, with the same type and default); a key
  /// no task declares belongs to all.
  std::vector<KeySpec> keys;
  /// Checks of the task's keys and of shared keys the task reads in its own
  /// way (data.dataset's choices), beyond the schema's types.
  std::function<void(const Config&)> validate;
  std::function<std::unique_ptr<Task>(const Config&)> make;
};

/// Adds a task (STYLE: registries filled by an explicit call). A name taken
/// twice is an error.
void register_task(TaskInfo info);
/// Registers cls, det, seg and pose (idempotent).
void register_builtin_tasks();
/// The task of that name; an unknown one is an error listing the known ones.
const TaskInfo& task_info(const std::string& name);
/// Registered task names, in registration order.
std::vector<std::string> task_names();
/// The task `cfg` asks for (cfg is validated).
std::unique_ptr<Task> make_task(const Config& cfg);

/// The data set data.dataset names among the config's task's; another name is
/// an error listing the task's data sets.
const DatasetInfo& dataset_info(const Config& cfg);
/// What data.dataset's entry keeps for its task (DatasetInfo::source, of the
/// type that task registered).
template <typename Source>
const Source& dataset_source(const Config& cfg) {
  return std::any_cast<const Source&>(dataset_info(cfg).source);
}
/// dataset_info, then its required keys: each must be set ("must be set with
/// data.dataset \"voc\""). The tasks' validators call it first.
const DatasetInfo& check_dataset(const Config& cfg);
/// The data sets of a task, in its order.
std::vector<std::string> dataset_names(const std::string& task);
/// One line per data set of every task, as tcv-train --list-datasets prints them:
/// the task, the name and the description.
std::string dataset_listing();
/// One line per task (name and description), as tcv-train --list-tasks prints them.
std::string task_listing();

// ---- helpers the tasks share ----------------------------------------------------

/// "file:line: key" (or just "key" for a default), to start an error about that key.
std::string at_key(const Config& cfg, const std::string& key);

/// Runs fn, turning a tcv::Error into a ConfigError that names `key` and its line.
template <typename F>
auto for_key(const Config& cfg, const std::string& key, F fn) {
  try {
    return fn();
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw ConfigError(at_key(cfg, key) + ": " + e.what());
  }
}

/// Builds network.model_name through the model registry, naming the key in errors.
std::shared_ptr<nn::Module> create_config_model(const Config& cfg, int64_t num_classes,
                                                int64_t in_channels);

/// The error for a network.model_name that is not a model of the config's task:
/// "<key>: \"resnet18\" is not a <kind> model (task = \"det\" trains ssd300, ...)",
/// the names those the task's family registered.
ConfigError not_a_task_model(const Config& cfg, const std::string& kind);

/// Builds network.model_name as a model of the config's task (its family's
/// builder from Options, models::create_family_model), naming the key in errors;
/// another family's name is not_a_task_model(cfg, kind).
template <class Model, class Options>
std::shared_ptr<Model> create_task_model(const Config& cfg, const std::string& kind, Options opts) {
  models::register_builtin_models();
  const std::string& name = cfg.settings().network.model_name;
  auto model = for_key(cfg, "network.model_name", [&] {
    return models::create_family_model<Model, Options>(name, std::move(opts));
  });
  if (!model) throw not_a_task_model(cfg, kind);
  return model;
}

/// Loads the model weights of a checkpoint for prediction: the stem it resolves
/// to, after checking that it holds network.model_name (and the task's model).
std::string load_model_for_prediction(const Config& cfg, const std::string& checkpoint,
                                      nn::Module& model);

/// task.make_model() as a Model with the weights of `checkpoint`
/// (load_model_for_prediction), and the stem the checkpoint resolved to.
template <class Model>
std::pair<std::shared_ptr<Model>, std::string> model_for_prediction(Task& task, const Config& cfg,
                                                                    const std::string& checkpoint) {
  auto model = std::dynamic_pointer_cast<Model>(task.make_model());
  TCV_CHECK(model, "network.model_name does not build the task's model type");
  std::string stem = load_model_for_prediction(cfg, checkpoint, *model);
  return {std::move(model), std::move(stem)};
}

/// An evaluator that scores a results file (or folder) against the whole val
/// split: Eval(args..., rank 0, world 1), then Eval::add_results(results).
template <class Eval, class... Args>
std::unique_ptr<TaskEvaluator> results_evaluator(const std::string& results, const Args&... args) {
  auto ev = std::make_unique<Eval>(args..., 0, 1);
  ev->add_results(results);
  return ev;
}

/// The TaskInfo of task type T: `parse` (T's config parser, which also checks
/// the keys) is its validator, and T(cfg) builds the task.
template <class T, class Parse>
TaskInfo task_info_for(std::string name, std::string description, std::vector<DatasetInfo> datasets,
                       std::vector<KeySpec> keys, Parse parse) {
  return {
      .name = std::move(name),
      .description = std::move(description),
      .datasets = std::move(datasets),
      .keys = std::move(keys),
      .validate = [parse](const Config& cfg) { parse(cfg); },
      .make = [](const Config& cfg) -> std::unique_ptr<Task> { return std::make_unique<T>(cfg); }};
}

}  // namespace tcv::train
