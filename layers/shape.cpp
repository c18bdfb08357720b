#include "layers/shape.h"

#include <cmath>

namespace tcv::nn {

Flatten::Flatten(int64_t start, int64_t end) : start_dim(start), end_dim(end) {}

Tensor Flatten::forward(const Tensor& x) {
  return x.flatten(start_dim, end_dim);
}

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

Upsample::Upsample(UpsampleOptions opts) : options(opts) {
  const bool has_size = opts.size.h > 0 && opts.size.w > 0;
  const bool has_scale = opts.scale_factor > 0.0;
  TCV_CHECK(has_size != has_scale, "[Upsample] set exactly one of size (positive, got ",
            opts.size.tuple_str(), ") and scale_factor (positive, got ", opts.scale_factor, ")");
  TCV_CHECK(!opts.align_corners || opts.mode == ops::InterpMode::bilinear,
            "[Upsample] align_corners only applies to mode bilinear");
}

Tensor Upsample::forward(const Tensor& x) {
  TCV_CHECK(x.dim() == 4, "[Upsample] expects 4-D input (N, C, H, W), got ", x.shape_str());
  std::array<int64_t, 2> size = options.size.arr();
  if (options.scale_factor > 0.0) {
    size = {
        static_cast<int64_t>(std::floor(static_cast<double>(x.size(2)) * options.scale_factor)),
        static_cast<int64_t>(std::floor(static_cast<double>(x.size(3)) * options.scale_factor))};
  }
  return ops::upsample(x, size, {.mode = options.mode, .align_corners = options.align_corners});
}

std::string Upsample::extra_repr() const {
  std::string s = options.scale_factor > 0.0 ? "scale_factor=" + repr_float(options.scale_factor)
                                             : "size=" + options.size.tuple_str();
  return s + ", mode=" + (options.mode == ops::InterpMode::nearest ? "nearest" : "bilinear");
}

}  // namespace tcv::nn
