// Indexing ops: index_select, gather, scatter_add, masked_fill. The gradients
// are each other: gather's backward is a scatter_add and scatter_add's is a gather.
#include <algorithm>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "kernels/cpu/index.h"
#include "kernels/cuda/index.h"

namespace tcv::ops {

namespace {

void check_index_dtype(const char* op, const Tensor& index) {
  TCV_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, "[", op,
            "] index must be i64 or i32, got ", dtype_name(index.dtype()), " of shape ",
            index.shape_str());
}

void check_same_device(const char* op, const Tensor& x, const Tensor& other, const char* what) {
  TCV_CHECK(x.device() == other.device(), "[", op, "] input is on ", x.device().str(), " but ",
            what, " is on ", other.device().str());
}

// Every value of index inside [0, size) of the indexed dim d: one pass over the
// index (one sync on a GPU) before the kernel reads through it.
void check_index_range(const char* op, const Tensor& index, int64_t size, int64_t d) {
  kernels::IndexOutOfRange bad;
  TCV_KERNEL(index.device(), find_index_out_of_range, index.strided_desc(), size, &bad);
  TCV_CHECK(!bad.found, "[", op, "] index ", bad.value, " is out of range for dim ", d, " of size ",
            size);
}

// gather/scatter_add: index has x's rank and fits inside x outside `d` (and inside
// `src` everywhere, when given).
void check_index_shape(const char* op, const Tensor& x, int64_t d, const Tensor& index,
                       const Tensor* src) {
  TCV_CHECK(index.dim() == x.dim(), "[", op, "] index ", index.shape_str(),
            " needs as many dims as input ", x.shape_str());
  for (int64_t k = 0; k < x.dim(); ++k) {
    TCV_CHECK(k == d || index.shape()[k] <= x.shape()[k], "[", op, "] index ", index.shape_str(),
              " is larger than input ", x.shape_str(), " in dim ", k, " (only dim ", d,
              " may differ)");
    if (src)
      TCV_CHECK(index.shape()[k] <= src->shape()[k], "[", op, "] index ", index.shape_str(),
                " is larger than src ", src->shape_str(), " in dim ", k);
  }
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  TCV_CHECK(x.dim() >= 1, "[index_select] input must have at least one dim, got shape ",
            x.shape_str());
  const int64_t d = x.wrap_dim(dim, "index_select");
  check_index_dtype("index_select", index);
  check_same_device("index_select", x, index, "index");
  TCV_CHECK(index.dim() <= 1, "[index_select] index must be 1-D, got shape ", index.shape_str());
  Shape out_shape = x.shape();
  out_shape[d] = index.numel();
  Tensor idx = index.reshape({index.numel()});
  check_index_range("index_select", idx, x.shape()[d], d);
  Tensor in = x.detach().contiguous();
  Tensor out = empty(out_shape, {.dtype = x.dtype(), .device = x.device()});
  TCV_KERNEL(x.device(), index_select, out.strided_desc(), in.strided_desc(), static_cast<int>(d),
             idx.strided_desc());
  if (autograd::needs_grad({&x}))
    autograd::record("index_select", {x}, {out},
                     [d, si = SavedTensor(idx), in_shape = x.shape()](std::vector<Tensor>& g) {
                       // index_select == gather with the index broadcast along the other dims.
                       Shape ishape(in_shape.size(), 1);
                       ishape[d] = -1;
                       Tensor ix = si.get().view(ishape).expand(g[0].shape());
                       Tensor z = zeros(in_shape, {.dtype = g[0].dtype(), .device = g[0].device()});
                       return std::vector<Tensor>{scatter_add(z, d, ix, g[0])};
                     });
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  TCV_CHECK(x.dim() >= 1, "[gather] input must have at least one dim, got shape ", x.shape_str());
  const int64_t d = x.wrap_dim(dim, "gather");
  check_index_dtype("gather", index);
  check_same_device("gather", x, index, "index");
  check_index_shape("gather", x, d, index, nullptr);
  check_index_range("gather", index, x.shape()[d], d);
  Tensor out = empty(index.shape(), {.dtype = x.dtype(), .device = x.device()});
  TCV_KERNEL(x.device(), gather, out.strided_desc(), x.strided_desc(), static_cast<int>(d),
             index.strided_desc());
  if (autograd::needs_grad({&x}))
    autograd::record("gather", {x}, {out},
                     [d, si = SavedTensor(index), in_shape = x.shape()](std::vector<Tensor>& g) {
                       Tensor z = zeros(in_shape, {.dtype = g[0].dtype(), .device = g[0].device()});
                       return std::vector<Tensor>{scatter_add(z, d, si.get(), g[0])};
                     });
  return out;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  TCV_CHECK(x.dim() >= 1, "[scatter_add] input must have at least one dim, got shape ",
            x.shape_str());
  const int64_t d = x.wrap_dim(dim, "scatter_add");
  check_index_dtype("scatter_add", index);
  check_same_device("scatter_add", x, index, "index");
  check_same_device("scatter_add", x, src, "src");
  TCV_CHECK(src.dtype() == x.dtype(), "[scatter_add] src is ", dtype_name(src.dtype()),
            " but input is ", dtype_name(x.dtype()), " (input ", x.shape_str(), ", src ",
            src.shape_str(), ")");
  TCV_CHECK(src.dim() == x.dim(), "[scatter_add] src ", src.shape_str(),
            " needs as many dims as input ", x.shape_str());
  check_index_shape("scatter_add", x, d, index, &src);
  check_index_range("scatter_add", index, x.shape()[d], d);
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  backend::copy(out, x.detach());
  TCV_KERNEL(x.device(), scatter_add, out.strided_desc(), static_cast<int>(d), index.strided_desc(),
             src.strided_desc());
  if (autograd::needs_grad({&x, &src})) {
    const bool gsrc = src.requires_grad();
    autograd::record(
        "scatter_add", {x, src}, {out},
        [d, gsrc, si = SavedTensor(index), src_shape = src.shape()](std::vector<Tensor>& g) {
          Tensor dsrc;
          if (gsrc) {
            Tensor ix = si.get();
            dsrc = gather(g[0], d, ix);
            if (ix.shape() != src_shape) {
              // src positions outside index's extent received nothing.
              Tensor z = zeros(src_shape, {.dtype = dsrc.dtype(), .device = dsrc.device()});
              Tensor v = z;
              for (int64_t k = 0; k < z.dim(); ++k) v = v.narrow(k, 0, ix.shape()[k]);
              v.copy_(dsrc);
              dsrc = z;
            }
          }
          return std::vector<Tensor>{g[0], dsrc};
        });
  }
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  TCV_CHECK(mask.dtype() == DType::b8, "[masked_fill] mask must be bool, got ",
            dtype_name(mask.dtype()), " of shape ", mask.shape_str());
  check_same_device("masked_fill", x, mask, "mask");
  const Shape b = broadcast_shapes(x.shape(), mask.shape(), "masked_fill");
  TCV_CHECK(b == x.shape(), "[masked_fill] mask ", mask.shape_str(),
            " must broadcast to the input's shape ", x.shape_str());
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  TCV_KERNEL(x.device(), masked_fill, out.strided_desc(), x.strided_desc(),
             mask.detach().expand(x.shape()).strided_desc(), value);
  if (autograd::needs_grad({&x}))
    autograd::record("masked_fill", {x}, {out}, [sm = SavedTensor(mask)](std::vector<Tensor>& g) {
      return std::vector<Tensor>{masked_fill(g[0], sm.get(), 0.0)};
    });
  return out;
}

}  // namespace tcv::ops
