// 2-D upsampling (nearest, bilinear) with PyTorch's index math.
#include "kernels/cpu/upsample.h"
#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "kernels/cuda/upsample.h"

namespace tcv::ops {

Tensor upsample(const Tensor& x, std::array<int64_t, 2> size, const UpsampleOptions& opts) {
  const InterpMode mode = opts.mode;
  const bool align_corners = opts.align_corners;
  TCV_CHECK(x.dim() == 4, "[upsample] expects (N, C, H, W) input, got ", x.shape_str());
  TCV_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64 || x.dtype() == DType::bf16 ||
                (x.device().is_cuda() && x.dtype() == DType::f16),
            "[upsample] needs an f32, f64 or bf16 tensor (or f16 on CUDA), got ",
            dtype_name(x.dtype()));
  // The CPU loops are f32/f64: bf16 (mixed precision) goes through f32.
  if (x.device().is_cpu() && x.dtype() == DType::bf16)
    return upsample(x.to(DType::f32), size, opts).to(DType::bf16);
  TCV_CHECK(size[0] > 0 && size[1] > 0, "[upsample] output size (", size[0], ", ", size[1],
            ") must be positive, input ", x.shape_str());
  TCV_CHECK(x.size(2) > 0 && x.size(3) > 0, "[upsample] input ", x.shape_str(),
            " has an empty spatial dim");
  TCV_CHECK(mode == InterpMode::bilinear || !align_corners,
            "[upsample] align_corners only applies to bilinear mode");
  Tensor xin = x.detach().contiguous();
  Tensor out = empty({x.size(0), x.size(1), size[0], size[1]},
                     {.dtype = x.dtype(), .device = x.device()});  // (N, C, OH, OW)
  if (out.numel() > 0) {
    if (mode == InterpMode::nearest) {
      TCV_KERNEL(x.device(), upsample_nearest2d, out.strided_desc(), xin.strided_desc());
    } else {
      TCV_KERNEL(x.device(), upsample_bilinear2d, out.strided_desc(), xin.strided_desc(),
                 align_corners);
    }
  }
  if (autograd::needs_grad({&x}))
    autograd::record("upsample", {x}, {out},
                     [mode, align_corners, in_shape = x.shape()](std::vector<Tensor>& g) {
                       Tensor dy = g[0].contiguous();
                       Tensor dx = empty(in_shape, {.dtype = dy.dtype(), .device = dy.device()});
                       if (dx.numel() > 0) {
                         if (mode == InterpMode::nearest) {
                           TCV_KERNEL(dy.device(), upsample_nearest2d_backward, dx.strided_desc(),
                                      dy.strided_desc());
                         } else {
                           TCV_KERNEL(dy.device(), upsample_bilinear2d_backward, dx.strided_desc(),
                                      dy.strided_desc(), align_corners);
                         }
                       }
                       return std::vector<Tensor>{dx};
                     });
  return out;
}

}  // namespace tcv::ops
