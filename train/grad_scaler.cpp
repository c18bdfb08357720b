#include "train/grad_scaler.h"

#include <cmath>

#include "engine/autograd.h"
#include "engine/ops.h"

namespace tcv::train {

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.init_scale) {
  TCV_CHECK(options.init_scale > 0 && options.growth_factor > 1 && options.backoff_factor > 0 &&
                options.backoff_factor < 1 && options.growth_interval > 0,
            "[GradScaler] needs init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 and "
            "growth_interval > 0");
}

Tensor GradScaler::scale(const Tensor& loss) const {
  return ops::mul(loss, scale_);
}

bool GradScaler::unscale(const nn::StateDict& params) {
  NoGradGuard no_grad;
  const double inv = 1.0 / scale_;
  // 0·g is 0 for finite g and NaN for inf or NaN: summing those over every
  // gradient gives one number to check, without overflow of its own.
  Tensor probe;
  for (const auto& [name, p] : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    g.mul_(inv);
    Tensor s = ops::sum(ops::mul(g, 0.0).to(DType::f32));
    probe = probe.defined() ? ops::add(probe, s) : s;
  }
  finite_ = !probe.defined() || std::isfinite(probe.item());
  unscaled_ = true;
  return finite_;
}

bool GradScaler::step(Optimizer& optimizer) {
  if (!unscaled_) unscale(optimizer.params());
  const bool finite = finite_;
  if (finite)
    optimizer.step();
  else
    ++skipped_;
  update(finite);
  unscaled_ = false;
  return finite;
}

void GradScaler::update(bool finite) {
  if (!finite) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
}

void GradScaler::set_state(double scale, int64_t growth_tracker) {
  TCV_CHECK(scale > 0 && std::isfinite(scale), "[GradScaler] scale must be finite and > 0, got ",
            scale);
  scale_ = scale;
  growth_tracker_ = growth_tracker;
}

}  // namespace tcv::train
