// Sorting ops: sort and topk. Both return i64 indices along the sorted dim; the
// gradient scatters back to those positions.
#include <algorithm>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "kernels/cpu/sort.h"
#include "kernels/cuda/sort.h"

namespace tcv::ops {

namespace {

struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
};

Lines lines(const Tensor& x, int64_t d) {
  Lines l;
  for (int64_t i = 0; i < d; ++i) l.outer *= x.shape()[i];
  l.n = x.shape()[d];
  for (int64_t i = d + 1; i < x.dim(); ++i) l.inner *= x.shape()[i];
  return l;
}

void record_scatter_back(const char* name, const Tensor& x, const Tensor& values,
                         const Tensor& indices, int64_t d) {
  if (!autograd::needs_grad({&x})) return;
  autograd::record(name, {x}, {values},
                   [d, si = SavedTensor(indices), in_shape = x.shape()](std::vector<Tensor>& g) {
                     Tensor z = zeros(in_shape, {.dtype = g[0].dtype(), .device = g[0].device()});
                     if (in_shape.empty()) return std::vector<Tensor>{g[0]};
                     return std::vector<Tensor>{scatter_add(z, d, si.get(), g[0])};
                   });
}

}  // namespace

std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  const int64_t d = x.wrap_dim(dim, "sort");
  Tensor in = x.detach().contiguous();
  Tensor values = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  Tensor indices = empty(x.shape(), {.dtype = DType::i64, .device = x.device()});
  if (x.dim() == 0) {
    values.copy_(in);
    indices.zero_();
  } else {
    const Lines l = lines(x, d);
    TCV_KERNEL(x.device(), sort, values.strided_desc(), indices.strided_desc(), in.strided_desc(),
               l.outer, l.n, l.inner, descending);
  }
  record_scatter_back("sort", x, values, indices, d);
  return {values, indices};
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  (void)sorted;  // always sorted: ordering the k results costs little next to finding them
  const int64_t d = x.wrap_dim(dim, "topk");
  const int64_t n = x.dim() == 0 ? 1 : x.shape()[d];
  TCV_CHECK(k >= 0 && k <= n, "[topk] k ", k, " is out of range for dim ", d, " of size ", n,
            " (input ", x.shape_str(), ")");
  Tensor in = x.detach().contiguous();
  Shape out_shape = x.shape();
  if (x.dim() > 0) out_shape[d] = k;
  Tensor values = empty(out_shape, {.dtype = x.dtype(), .device = x.device()});
  Tensor indices = empty(out_shape, {.dtype = DType::i64, .device = x.device()});
  if (x.dim() == 0) {
    values.copy_(in);
    indices.zero_();
  } else {
    const Lines l = lines(x, d);
    TCV_KERNEL(x.device(), topk, values.strided_desc(), indices.strided_desc(), in.strided_desc(),
               l.outer, l.n, l.inner, k, largest);
  }
  record_scatter_back("topk", x, values, indices, d);
  return {values, indices};
}

}  // namespace tcv::ops
