// The NMS overlap threshold in the boxes' own type, for both backends'
// kernels (kernels/cpu/boxes.cpp, kernels/cuda/boxes.cu).
#pragma once

#include <cmath>
#include <limits>

namespace tcv::kernels {

/// The largest T not above thr: for every T value v (NaN included),
/// v > result exactly when double(v) > thr, so a comparison in T decides what
/// torchvision's comparison of a T overlap with a double threshold decides.
template <typename T>
T threshold_in(double thr) {
  T t = static_cast<T>(thr);
  if (static_cast<double>(t) > thr) t = std::nextafter(t, -std::numeric_limits<T>::infinity());
  return t;
}

}  // namespace tcv::kernels
