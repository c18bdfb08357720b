// Dynamic loss scaling for f16 training (PyTorch's GradScaler): the loss is
// multiplied by `scale` before backward so small gradients survive f16; the
// step then unscales the gradients, skips the update when any of them is inf
// or NaN (and halves the scale), and doubles the scale after
// `growth_interval` clean steps in a row. bf16 has f32's range and needs none.
#pragma once

#include <cstdint>

#include "train/optim.h"

namespace tcv::train {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  /// loss · scale.
  Tensor scale(const Tensor& loss) const;
  /// Divides every defined gradient by the scale in place and reports whether
  /// all of them are finite (one host sync for all parameters).
  bool unscale(const nn::StateDict& params);
  /// Unscales (unless unscale() already ran for this step), steps the
  /// optimizer when the gradients are finite, and updates the scale.
  /// Returns whether the optimizer stepped.
  bool step(Optimizer& optimizer);

  double get_scale() const { return scale_; }
  int64_t skipped_steps() const { return skipped_; }
  /// For checkpoints: the scale and the count of clean steps since the last change.
  void set_state(double scale, int64_t growth_tracker);
  int64_t growth_tracker() const { return growth_tracker_; }

 private:
  void update(bool finite);

  GradScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  int64_t skipped_ = 0;
  bool unscaled_ = false;
  bool finite_ = true;
};

}  // namespace tcv::train
