// Reductions: the input is laid out as (outer, reduced, inner), permuting and
// copying only when the reduced dims are not one contiguous block.
#include "engine/ops/reduce.h"

#include <algorithm>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/reduce.h"

namespace tcv::ops {

namespace {

struct Plan {
  Tensor input;  // contiguous, laid out as (outer, r, inner)
  int64_t outer = 1, r = 1, inner = 1;
  Shape out_shape;   // keepdim=false
  Shape keep_shape;  // keepdim=true
};

std::vector<bool> dim_mask(const Tensor& x, const Shape& dims, const char* op) {
  std::vector<bool> red(static_cast<size_t>(x.dim()), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = x.wrap_dim(d, op);
    TCV_CHECK(!red[w] || dims.empty(), "[", op, "] dim ", d, " repeated");
    red[w] = true;
  }
  return red;
}

Plan plan(const Tensor& x, const Shape& dims, const char* op) {
  Plan p;
  const std::vector<bool> red = dim_mask(x, dims, op);
  const int64_t n = x.dim();
  for (int64_t i = 0; i < n; ++i) {
    p.keep_shape.push_back(red[i] ? 1 : x.shape()[i]);
    if (!red[i]) p.out_shape.push_back(x.shape()[i]);
  }
  int64_t first = -1, last = -1;
  for (int64_t i = 0; i < n; ++i)
    if (red[i] && x.shape()[i] != 1) {
      if (first < 0) first = i;
      last = i;
    }
  bool block = true;
  for (int64_t i = first; first >= 0 && i <= last; ++i)
    if (!red[i] && x.shape()[i] != 1) block = false;
  if (first < 0) {  // nothing (non-trivial) to reduce
    p.input = x.detach().contiguous();
    p.outer = x.numel();
    return p;
  }
  if (block) {
    p.input = x.detach().contiguous();
    for (int64_t i = 0; i < first; ++i) p.outer *= x.shape()[i];
    for (int64_t i = first; i <= last; ++i) p.r *= x.shape()[i];
    for (int64_t i = last + 1; i < n; ++i) p.inner *= x.shape()[i];
    return p;
  }
  Shape perm;
  for (int64_t i = 0; i < n; ++i)
    if (!red[i]) perm.push_back(i);
  for (int64_t i = 0; i < n; ++i)
    if (red[i]) {
      perm.push_back(i);
      p.r *= x.shape()[i];
    }
  p.input = x.detach().permute(perm).contiguous();
  p.outer = x.numel() / std::max<int64_t>(p.r, 1);
  return p;
}

DType sum_dtype(DType t) {
  return is_floating(t) ? t : DType::i64;
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  Tensor xin = x.dtype() == sum_dtype(x.dtype()) ? x : x.detach().to(sum_dtype(x.dtype()));
  Plan p = plan(xin, dims, "sum");
  Tensor out =
      empty(keepdim ? p.keep_shape : p.out_shape, {.dtype = xin.dtype(), .device = x.device()});
  if (p.r == 0 || p.input.numel() == 0) {
    out.zero_();
  } else {
    TCV_KERNEL(x.device(), reduce, kernels::ReduceOp::sum, out.strided_desc(),
               p.input.strided_desc(), p.outer, p.r, p.inner);
  }
  if (autograd::needs_grad({&x}))
    autograd::record("sum", {x}, {out},
                     [in_shape = x.shape(), keep = p.keep_shape](std::vector<Tensor>& g) {
                       return std::vector<Tensor>{g[0].reshape(keep).expand(in_shape).contiguous()};
                     });
  return out;
}

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  TCV_CHECK(is_floating(x.dtype()), "[mean] needs a floating tensor, got ", dtype_name(x.dtype()));
  const std::vector<bool> red = dim_mask(x, dims, "mean");
  int64_t count = 1;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (red[i]) count *= x.shape()[i];
  // An empty reduction is 0 / 0 = NaN, as in PyTorch.
  return mul(sum(x, dims, keepdim), 1.0 / static_cast<double>(count));
}

Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  const std::vector<bool> red = dim_mask(x, dims, "var");
  int64_t count = 1;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (red[i]) count *= x.shape()[i];
  Tensor centered = sub(x, mean(x, dims, /*keepdim=*/true));
  const double denom = static_cast<double>(std::max<int64_t>(count - correction, 0));
  return mul(sum(square(centered), dims, keepdim), 1.0 / denom);
}

namespace {

std::pair<Tensor, Tensor> extreme(kernels::ReduceOp op, const Tensor& x, int64_t dim,
                                  bool keepdim) {
  const char* name = op == kernels::ReduceOp::max ? "max" : "min";
  const int64_t d = x.wrap_dim(dim, name);
  Tensor xin = x.dim() == 0 ? x.reshape({1}) : x;
  Plan p = plan(xin, {d}, name);
  if (x.dim() == 0) p.keep_shape = p.out_shape = {};
  TCV_CHECK(p.r > 0, "[", name, "] reduction over an empty dim (dim ", d, " of shape ",
            x.shape_str(), ")");
  Shape shape = keepdim ? p.keep_shape : p.out_shape;
  Tensor values = empty(shape, {.dtype = x.dtype(), .device = x.device()});
  Tensor indices = empty(shape, {.dtype = DType::i64, .device = x.device()});
  const kernels::KTensor ik = indices.strided_desc();
  TCV_KERNEL(x.device(), reduce, op, values.strided_desc(), p.input.strided_desc(), p.outer, p.r,
             p.inner, &ik);
  if (autograd::needs_grad({&x}))
    autograd::record(
        name, {x}, {values},
        [in_shape = x.shape(), d, keep = p.keep_shape, idx = indices,
         dt = x.dtype()](std::vector<Tensor>& g) {
          Tensor z = zeros(in_shape, {.dtype = dt, .device = g[0].device()});
          if (in_shape.empty()) return std::vector<Tensor>{g[0]};
          return std::vector<Tensor>{scatter_add(z, d, idx.reshape(keep), g[0].reshape(keep))};
        });
  return {values, indices};
}

}  // namespace

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme(kernels::ReduceOp::max, x, dim, keepdim);
}
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme(kernels::ReduceOp::min, x, dim, keepdim);
}
Tensor max(const Tensor& x) {
  return max(x.reshape({-1}), 0).first;
}
Tensor min(const Tensor& x) {
  return min(x.reshape({-1}), 0).first;
}
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  NoGradGuard ng;
  return max(x, dim, keepdim).second;
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  NoGradGuard ng;
  return min(x, dim, keepdim).second;
}

}  // namespace tcv::ops
