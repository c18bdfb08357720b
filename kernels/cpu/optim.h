// Fused optimizer updates on the CPU: one pass over each parameter, no
// temporaries, split across OpenMP threads.
#pragma once

#include <cstdint>

namespace tcv::kernels::cpu {

/// torch.optim.SGD for one parameter of n elements (T = float or double):
///   d = g + weight_decay·p
///   buf = first ? d : momentum·buf + (1 - dampening)·d     (when momentum != 0)
///   d = nesterov ? d + momentum·buf : buf                   (when momentum != 0)
///   p -= lr·d
/// `buf` may be null when momentum == 0.
template <typename T>
void sgd_step(T* p, const T* g, T* buf, int64_t n, double lr, double momentum, double dampening,
              double weight_decay, bool nesterov, bool first);

/// How Adam applies weight decay: added to the gradient (torch.optim.Adam) or
/// to the parameter directly (torch.optim.AdamW).
enum class AdamDecay : uint8_t { l2, decoupled };

/// torch.optim.Adam / AdamW for one parameter of n elements, at step `step` (1-based):
///   l2:        g = g + weight_decay·p
///   decoupled: p *= 1 - lr·weight_decay
///   m = beta1·m + (1 - beta1)·g;  v = beta2·v + (1 - beta2)·g²
///   p -= lr / (1 - beta1^step) · m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
template <typename T>
void adam_step(T* p, const T* g, T* m, T* v, int64_t n, double lr, double beta1, double beta2,
               double eps, double weight_decay, AdamDecay decay, int64_t step);

}  // namespace tcv::kernels::cpu
