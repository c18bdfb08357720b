// Padding CPU kernels: constant, reflect and replicate over any dims, with
// negative pads cropping.
#pragma once

#include "kernels/base.h"

namespace tcv::kernels {
enum class PadMode : uint8_t { constant, reflect, replicate };
}

namespace tcv::kernels::cpu {

/// out = in padded by before[d] elements in front of each dim d (after-pads follow
/// from out.sizes). Pads may be negative (crop). reflect needs pads < in.sizes[d],
/// replicate a non-empty input; the caller checks. `in` and `out` contiguous.
void pad(PadMode mode, const KTensor& out, const KTensor& in, const int64_t* before, double value);

/// dx (zeroed here) = the sum of dy over every output position that read each
/// input element. Floating dtypes; dx and dy contiguous.
void pad_backward(PadMode mode, const KTensor& dx, const KTensor& dy, const int64_t* before);

}  // namespace tcv::kernels::cpu
