// Checkpoints: one safetensors file per checkpoint, "<stem>.safetensors",
// holding the model ("model.<name>"), the optimizer state ("optim.<name>") and,
// in the header's "__metadata__", the trainer state as JSON text
// ("trainer_state"). One file is written with one atomic rename, so a
// checkpoint is always whole: a kill or a full disk while saving leaves the
// previous one as it was (and a "*.tmp.<pid>.<n>" file that the next run
// removes). Checkpoints of earlier tcv versions (trainer state in a
// "<stem>.json" beside the weights) still load.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "layers/module.h"
#include "train/optim.h"

namespace tcv::train {

/// Where training stands. Positions count what is done: `iter` iterations in
/// all, `epoch_iter` batches of epoch `epoch` (0-based, the epoch the next
/// iteration belongs to).
struct TrainerState {
  int64_t epoch = 0;
  int64_t epoch_iter = 0;
  int64_t iter = 0;
  double lr = 0.0;                ///< learning rate of the last iteration
  uint64_t rng_seed = 0;          ///< default generator's seed ...
  uint64_t rng_offset = 0;        ///< ... and position
  double elapsed_s = 0.0;         ///< training wall time so far, over all runs
  int64_t nonfinite_skipped = 0;  ///< steps dropped for inf/NaN (solver.nonfinite = "skip")
  std::string model_name;
  std::string task = "cls";  ///< the task trained (config key `task`)
  /// The validation metric that picks `best` (the task's: top1, map, miou), its
  /// best value so far and its value at the latest evaluation (-1: none yet).
  /// The JSON names them "best_<metric>" and "last_<metric>".
  std::string best_metric = "top1";
  double best_score = -1.0;
  double last_score = -1.0;
};

/// Writes `<stem>.safetensors` (model, optimizer state and trainer state)
/// atomically. Refuses, naming the tensor, when a model or optimizer tensor
/// holds inf or NaN: a checkpoint never replaces a good one with bad numbers.
void save_checkpoint(const std::string& stem, const nn::Module& model, const Optimizer* optim,
                     const TrainerState& state);

/// The stem of the checkpoint that `path` names: a "<stem>.safetensors" file
/// (or an older "<stem>.json"), a stem, or a directory (its "latest", or its
/// "checkpoints/latest" when it is a run directory).
std::string resolve_checkpoint(const std::string& path);

/// The stem of the newest checkpoint in directory `dir` (the one with the most
/// iterations done; "latest" on a tie) whose trainer state and weights both
/// load, or "" when there is none (no directory, no checkpoint, or none that
/// loads). What network.resume = "auto" continues from.
std::string find_latest_checkpoint(const std::string& dir);

/// Reads the trainer state of checkpoint `stem` (the safetensors header only).
TrainerState load_trainer_state(const std::string& stem);

/// Parses the trainer state's JSON text; `where` names its origin in errors,
/// which also name the key at fault. Values are range-checked (iterations at
/// most kMaxIterations, scores in [0, 100] or -1, ...). States without "task"
/// and "best_metric" (earlier versions) are classification's, by top-1.
TrainerState parse_trainer_state(std::string_view json, const std::string& where);

/// Loads checkpoint `stem` into `model` (strict) and `optim` (when not null) and
/// returns its trainer state. Errors name the file and what is wrong: a
/// truncated file, tensors missing or of other shapes, a tensor holding inf or
/// NaN, a trainer state that does not parse.
TrainerState load_checkpoint(const std::string& stem, nn::Module& model, Optimizer* optim);

/// Removes the temp files ("<name>.tmp.<pid>.<n>") that a process killed
/// while writing left in `dir`, keeping those of live processes other than
/// this one. Returns how many it removed.
int64_t remove_stale_temp_files(const std::string& dir);

/// What load_pretrained() did.
struct PretrainedLoad {
  int64_t loaded = 0;             ///< tensors copied into the model
  std::vector<std::string> kept;  ///< head tensors left at their init (shape differs)
};

/// Loads pretrained weights for fine-tuning: a safetensors file with
/// torchvision's names (scripts/convert_torchvision.py) or a tcv checkpoint
/// ("model." keys). Every tensor must match by name and shape, except those of
/// the classifier head (the last module that owns parameters), which keep their
/// init when their shape differs: a new number of classes. Tensors holding inf
/// or NaN are refused. Errors name the file and the keys at fault.
PretrainedLoad load_pretrained(const std::string& path, nn::Module& model);

}  // namespace tcv::train
