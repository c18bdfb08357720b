#include "train/lr_policy.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "train/config.h"

namespace tcv::train {

LrPolicyKind parse_lr_policy(const std::string& name) {
  if (name == "fixed") return LrPolicyKind::fixed;
  if (name == "step") return LrPolicyKind::step;
  if (name == "multistep") return LrPolicyKind::multistep;
  if (name == "cosine") return LrPolicyKind::cosine;
  if (name == "lambda_poly" || name == "poly") return LrPolicyKind::lambda_poly;
  TCV_THROW("unknown lr_policy '", name,
            "' (valid: fixed, step, multistep, cosine, lambda_poly, poly)");
}

LrPolicy::LrPolicy(LrPolicyOptions opts) : opts_(std::move(opts)) {
  TCV_CHECK(opts_.base_lr > 0, "[LrPolicy] base_lr must be positive, got ", opts_.base_lr);
  TCV_CHECK(opts_.iters_per_unit > 0, "[LrPolicy] iters_per_unit must be positive");
  TCV_CHECK(opts_.max_iters > 0, "[LrPolicy] max_iters must be positive");
  TCV_CHECK(opts_.step_size > 0, "[LrPolicy] step_size must be positive");
  TCV_CHECK(opts_.warm_iters >= 0, "[LrPolicy] warm_iters must be >= 0");
}

LrPolicy LrPolicy::from_config(const Config& cfg, int64_t iters_per_epoch, int64_t max_iters) {
  const LrConfig& lr = cfg.settings().solver.lr;
  LrPolicyOptions o;
  o.kind = lr.lr_policy;
  o.base_lr = lr.base_lr;
  const bool per_epoch = lr.per_epoch;
  o.iters_per_unit = per_epoch ? iters_per_epoch : 1;
  o.decay = per_epoch ? LrPolicyOptions::Decay::per_unit : LrPolicyOptions::Decay::per_iter;
  o.max_iters = max_iters;
  o.step_gamma = lr.step_gamma;
  o.step_size = lr.step_size;
  o.multistep_gamma = lr.multistep_gamma;
  o.stepvalue = lr.stepvalue;
  o.poly_power = lr.poly_power;
  o.warm_iters = !lr.is_warm          ? 0
                 : lr.warm_epochs > 0 ? lr.warm_epochs * iters_per_epoch
                                      : lr.warm_iters;
  return LrPolicy(o);
}

double LrPolicy::lr_at(int64_t iter) const {
  iter = std::max<int64_t>(iter, 0);
  const int64_t unit = iter / opts_.iters_per_unit;
  const int64_t max_units = (opts_.max_iters + opts_.iters_per_unit - 1) / opts_.iters_per_unit;
  const double frac =
      opts_.decay == LrPolicyOptions::Decay::per_unit
          ? std::min(1.0, static_cast<double>(unit) / static_cast<double>(max_units))
          : std::min(1.0, static_cast<double>(iter) / static_cast<double>(opts_.max_iters));
  double lr = opts_.base_lr;
  switch (opts_.kind) {
    case LrPolicyKind::fixed:
      break;
    case LrPolicyKind::step:
      lr *= std::pow(opts_.step_gamma, static_cast<double>(unit / opts_.step_size));
      break;
    case LrPolicyKind::multistep: {
      const auto passed = std::upper_bound(opts_.stepvalue.begin(), opts_.stepvalue.end(), unit) -
                          opts_.stepvalue.begin();
      lr *= std::pow(opts_.multistep_gamma, static_cast<double>(passed));
      break;
    }
    case LrPolicyKind::cosine:
      lr *= 0.5 * (1.0 + std::cos(std::numbers::pi * frac));
      break;
    case LrPolicyKind::lambda_poly:
      lr *= std::pow(1.0 - frac, opts_.poly_power);
      break;
  }
  if (iter < opts_.warm_iters)
    lr *= static_cast<double>(iter + 1) / static_cast<double>(opts_.warm_iters);
  return lr;
}

}  // namespace tcv::train
