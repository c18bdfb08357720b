// softmax and log_softmax over any dim: one fused kernel each way, the
// backward reading only the forward output.
#include "kernels/cpu/softmax.h"
#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "kernels/cuda/softmax.h"

namespace tcv::ops {

namespace {

using kernels::SoftmaxKind;

Tensor softmax_impl(SoftmaxKind kind, const Tensor& x, int64_t dim) {
  if (autocast::needs_f32(x)) return softmax_impl(kind, x.to(DType::f32), dim);
  const char* name = kind == SoftmaxKind::softmax ? "softmax" : "log_softmax";
  TCV_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "[", name,
            "] needs an f32 or f64 tensor, got ", dtype_name(x.dtype()), " ", x.shape_str());
  // A 0-d tensor is one row of one element.
  Tensor xin = x.dim() == 0 ? x.detach().reshape({1}) : x.detach().contiguous();
  const int64_t d = xin.wrap_dim(dim, name);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= xin.size(i);
  for (int64_t i = d + 1; i < xin.dim(); ++i) inner *= xin.size(i);
  const int64_t r = xin.size(d);
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  if (out.numel() > 0) {
    TCV_KERNEL(x.device(), softmax, kind, out.strided_desc(), xin.strided_desc(), outer, r, inner);
  }
  if (autograd::needs_grad({&x}))
    autograd::record(name, {x}, {out},
                     [kind, name, so = SavedTensor(out), outer, r, inner](std::vector<Tensor>& g) {
                       Tensor y = so.get();
                       Tensor dy = g[0].contiguous();
                       Tensor dx = empty_like(y);
                       if (dx.numel() > 0) {
                         backend::require_device(name, y.device(), {&dy});
                         TCV_KERNEL(y.device(), softmax_backward, kind, dx.strided_desc(),
                                    dy.strided_desc(), y.strided_desc(), outer, r, inner);
                       }
                       return std::vector<Tensor>{dx};
                     });
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  return softmax_impl(SoftmaxKind::softmax, x, dim);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_impl(SoftmaxKind::log_softmax, x, dim);
}

}  // namespace tcv::ops
