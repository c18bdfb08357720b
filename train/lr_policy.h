// Learning-rate policies, evaluated per iteration, with optional linear warm-up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tcv::train {

class Config;

enum class LrPolicyKind : uint8_t { fixed, step, multistep, cosine, lambda_poly };

/// Parses "fixed" | "step" | "multistep" | "cosine" | "lambda_poly" (or its alias
/// "poly"); errors list the valid ones.
LrPolicyKind parse_lr_policy(const std::string& name);

struct LrPolicyOptions {
  LrPolicyKind kind = LrPolicyKind::fixed;
  double base_lr = 0.1;
  /// Units of step_size/stepvalue: iterations per unit (iters_per_epoch for
  /// metric "epoch", 1 for "iters").
  int64_t iters_per_unit = 1;
  /// Total iterations of the run (cosine and lambda_poly decay over it).
  int64_t max_iters = 1;
  /// Whether cosine and lambda_poly change every iteration or once per unit
  /// (TorchCV's metric "epoch": the value at the start of the unit, decaying over
  /// ceil(max_iters / iters_per_unit) units).
  enum class Decay : uint8_t { per_iter, per_unit } decay = Decay::per_iter;
  double step_gamma = 0.1;
  int64_t step_size = 30;
  double multistep_gamma = 0.1;
  std::vector<int64_t> stepvalue{};
  double poly_power = 0.9;
  /// Linear warm-up over the first warm_iters iterations (0 = none).
  int64_t warm_iters = 0;
};

/// The learning rate of each iteration (0-based), as TorchCV's schedulers:
/// - fixed:       base_lr
/// - step:        base_lr · gamma^floor(unit / step_size)
/// - multistep:   base_lr · gamma^(number of stepvalues <= unit)
/// - cosine:      base_lr · (1 + cos(π · t)) / 2
/// - lambda_poly: base_lr · (1 − t)^power
/// where unit = floor(iter / iters_per_unit) and t = iter / max_iters (per_iter)
/// or unit / ceil(max_iters / iters_per_unit) (per_unit). During warm-up
/// (always per iteration) the policy's value is scaled by (iter + 1) / warm_iters.
class LrPolicy {
 public:
  explicit LrPolicy(LrPolicyOptions opts);
  /// From a validated config; iters_per_epoch and max_iters come from the data.
  /// solver.lr.metric "epoch" makes step sizes count epochs and cosine and
  /// lambda_poly change once per epoch; "iters", iterations and every iteration.
  static LrPolicy from_config(const Config& cfg, int64_t iters_per_epoch, int64_t max_iters);

  double lr_at(int64_t iter) const;
  const LrPolicyOptions& options() const { return opts_; }

 private:
  LrPolicyOptions opts_;
};

}  // namespace tcv::train
