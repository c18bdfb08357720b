// The hyper-parameters of the fused optimizer steps (tcv::SgdParams,
// tcv::AdamParams): what the optimizers of train/optim.h pass down through
// the engine's ops (engine/ops/optim.h) to both backends' kernels. Below
// every folder of the tree, like tcv/core/dtype.h.
#pragma once

#include <cstdint>

namespace tcv {

/// torch.optim.SGD for a parameter p with gradient g and momentum buffer buf:
///   d = g + weight_decay·p
///   buf = first ? d : momentum·buf + (1 - dampening)·d     (when momentum != 0)
///   d = nesterov ? d + momentum·buf : buf                   (when momentum != 0)
///   p -= lr·d
/// Scalars are cast to the parameter's type first, as PyTorch's per-tensor ops do.
struct SgdParams {
  double lr = 0.0;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

/// How Adam applies weight decay: added to the gradient (torch.optim.Adam) or
/// to the parameter directly (torch.optim.AdamW).
enum class AdamDecay : uint8_t { l2, decoupled };

/// torch.optim.Adam / AdamW at step `step` (1-based), moments m and v:
///   l2:        g = g + weight_decay·p
///   decoupled: p *= 1 - lr·weight_decay
///   m = beta1·m + (1 - beta1)·g;  v = beta2·v + (1 - beta2)·g²
///   p -= lr / (1 - beta1^step) · m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
struct AdamParams {
  double lr = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  AdamDecay decay = AdamDecay::l2;
  int64_t step = 1;
};

}  // namespace tcv
