// Checkpoints: model and optimizer state in one safetensors file (keys
// "model.<name>" and "optim.<name>"), trainer state in a JSON file beside it
// ("<stem>.safetensors" + "<stem>.json"). Both are written atomically, the
// JSON last, so a JSON file always describes complete weights.
#pragma once

#include <cstdint>
#include <string>
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
  double lr = 0.0;          ///< learning rate of the last iteration
  uint64_t rng_seed = 0;    ///< default generator's seed ...
  uint64_t rng_offset = 0;  ///< ... and position
  double best_top1 = -1.0;  ///< best validation top-1 so far (-1: none yet)
  double last_top1 = -1.0;  ///< top-1 of the latest evaluation (-1: none yet)
  double elapsed_s = 0.0;   ///< training wall time so far, over all runs
  std::string model_name;
};

/// Writes `<stem>.safetensors` then `<stem>.json`.
void save_checkpoint(const std::string& stem, const nn::Module& model, const Optimizer* optim,
                     const TrainerState& state);

/// The stem of the checkpoint that `path` names: a "<stem>.json" or
/// "<stem>.safetensors" file, or a directory (its "latest", or its
/// "checkpoints/latest" when it is a run directory).
std::string resolve_checkpoint(const std::string& path);

/// The stem of the newest checkpoint in directory `dir` (the one with the most
/// iterations done; "latest" on a tie) whose trainer state and weights both
/// load, or "" when there is none (no directory, no checkpoint, or none that
/// loads). What network.resume = "auto" continues from.
std::string find_latest_checkpoint(const std::string& dir);

/// Reads the trainer state of checkpoint `stem`.
TrainerState load_trainer_state(const std::string& stem);

/// Loads checkpoint `stem` into `model` (strict) and `optim` (when not null) and
/// returns its trainer state. Errors name the file.
TrainerState load_checkpoint(const std::string& stem, nn::Module& model, Optimizer* optim);

/// What load_pretrained() did.
struct PretrainedLoad {
  int64_t loaded = 0;             ///< tensors copied into the model
  std::vector<std::string> kept;  ///< head tensors left at their init (shape differs)
};

/// Loads pretrained weights for fine-tuning: a safetensors file with
/// torchvision's names (scripts/convert_torchvision.py) or a tcv checkpoint
/// ("model." keys). Every tensor must match by name and shape, except those of
/// the classifier head (the last module that owns parameters), which keep their
/// init when their shape differs: a new number of classes. Errors name the
/// file and the keys at fault.
PretrainedLoad load_pretrained(const std::string& path, nn::Module& model);

}  // namespace tcv::train
