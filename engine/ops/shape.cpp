// Concatenation, splitting and padding. split/chunk return views (narrow), so
// their gradients flow through the view ops.
#include "engine/ops/shape.h"

#include <algorithm>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/dtype.h"
#include "engine/ops.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/pad.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/pad.h"

namespace tcv::ops {

namespace {
// torch's legacy rule: 1-D empty tensors are skipped by cat whatever the other shapes.
bool skipped_by_cat(const Tensor& t) {
  return t.dim() == 1 && t.numel() == 0;
}
}  // namespace

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  TCV_CHECK(!xs.empty(), "[cat] expects at least one tensor");
  // The first tensor that is not skipped sets the shape every other must match.
  size_t ref = 0;
  while (ref + 1 < xs.size() && skipped_by_cat(xs[ref])) ++ref;
  const Tensor& r = xs[ref];
  TCV_CHECK(r.defined(), "[cat] tensor ", ref, " is undefined");
  TCV_CHECK(r.dim() >= 1, "[cat] zero-dimensional tensor ", ref, " cannot be concatenated");
  const int64_t d = r.wrap_dim(dim, "cat");
  Shape out_shape = r.shape();
  out_shape[d] = 0;
  DType dt = r.dtype();
  std::vector<size_t> used;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    TCV_CHECK(x.defined(), "[cat] tensor ", i, " is undefined");
    if (i != ref && skipped_by_cat(x)) continue;
    TCV_CHECK(x.device() == r.device(), "[cat] tensor ", i, " is on ", x.device().str(),
              " but tensor ", ref, " is on ", r.device().str());
    TCV_CHECK(x.dim() == r.dim(), "[cat] tensor ", i, " has shape ", x.shape_str(), " but tensor ",
              ref, " has shape ", r.shape_str(), ": all need ", r.dim(), " dims");
    for (int64_t k = 0; k < r.dim(); ++k)
      TCV_CHECK(k == d || x.shape()[k] == r.shape()[k], "[cat] tensor ", i, " has shape ",
                x.shape_str(), " but tensor ", ref, " has shape ", r.shape_str(),
                ": sizes must match except in dim ", d);
    out_shape[d] += x.shape()[d];
    dt = promote_types(dt, x.dtype());
    used.push_back(i);
  }
  Tensor out = empty(out_shape, {.dtype = dt, .device = r.device()});
  // Each input goes into its slice of out through the copy kernel (which
  // converts its dtype).
  int64_t off = 0;
  for (size_t i : used) {
    const int64_t n = xs[i].shape()[d];
    if (n > 0 && xs[i].numel() > 0)
      TCV_KERNEL(out.device(), copy, out.narrow(d, off, n).strided_desc(), xs[i].strided_desc());
    off += n;
  }
  if (autograd::needs_grad(xs)) {
    // Each input's gradient is its slice of g (a view), cast back to its dtype.
    std::vector<DType> dtypes;
    std::vector<Shape> shapes;
    for (const Tensor& x : xs) {
      dtypes.push_back(x.dtype());
      shapes.push_back(x.shape());
    }
    autograd::record("cat", xs, {out}, [d, used, dtypes, shapes](std::vector<Tensor>& g) {
      std::vector<Tensor> dxs(dtypes.size());
      int64_t off = 0;
      for (size_t i : used) {
        const int64_t n = shapes[i][d];
        if (is_floating(dtypes[i])) {
          Tensor dx = g[0].narrow(d, off, n);
          dxs[i] = dx.dtype() == dtypes[i] ? dx : dx.to(dtypes[i]);
        }
        off += n;
      }
      return dxs;
    });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  TCV_CHECK(!xs.empty(), "[stack] expects at least one tensor");
  const int64_t n = xs[0].dim() + 1;
  const int64_t d = dim < 0 ? dim + n : dim;
  TCV_CHECK(d >= 0 && d < n, "[stack] dim ", dim, " out of range for tensors of shape ",
            xs[0].shape_str());
  std::vector<Tensor> us;
  us.reserve(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    TCV_CHECK(xs[i].shape() == xs[0].shape(), "[stack] tensor ", i, " has shape ",
              xs[i].shape_str(), " but tensor 0 has shape ", xs[0].shape_str(),
              ": stack needs equal shapes");
    us.push_back(xs[i].unsqueeze(d));
  }
  return cat(us, d);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  const int64_t d = x.wrap_dim(dim, "split");
  TCV_CHECK(x.dim() >= 1, "[split] cannot split a zero-dimensional tensor");
  const int64_t n = x.shape()[d];
  TCV_CHECK(split_size > 0 || (split_size == 0 && n == 0),
            "[split] split_size must be positive, got ", split_size, " for shape ", x.shape_str());
  std::vector<Tensor> out;
  if (n == 0) {
    out.push_back(x.narrow(d, 0, 0));
    return out;
  }
  for (int64_t start = 0; start < n; start += split_size)
    out.push_back(x.narrow(d, start, std::min(split_size, n - start)));
  return out;
}

std::vector<Tensor> split(const Tensor& x, const Shape& sizes, int64_t dim) {
  TCV_CHECK(x.dim() >= 1, "[split] cannot split a zero-dimensional tensor");
  const int64_t d = x.wrap_dim(dim, "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    TCV_CHECK(s >= 0, "[split] negative size in ", shape_str(sizes));
    total += s;
  }
  TCV_CHECK(total == x.shape()[d], "[split] sizes ", shape_str(sizes), " add up to ", total,
            " but dim ", d, " of shape ", x.shape_str(), " has ", x.shape()[d]);
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(x.narrow(d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  TCV_CHECK(chunks > 0, "[chunk] chunks must be positive, got ", chunks);
  TCV_CHECK(x.dim() >= 1, "[chunk] cannot chunk a zero-dimensional tensor");
  const int64_t n = x.shape()[x.wrap_dim(dim, "chunk")];
  // torch: pieces of ceil(n / chunks), so fewer than `chunks` may come back.
  return split(x, (n + chunks - 1) / chunks, dim);
}

// ---------------------------------------------------------------- pad

static_assert(static_cast<int>(PadMode::reflect) == static_cast<int>(kernels::PadMode::reflect) &&
              static_cast<int>(PadMode::replicate) ==
                  static_cast<int>(kernels::PadMode::replicate));

Tensor pad(const Tensor& x, const Shape& pads, PadMode mode, double value) {
  const int64_t nd = x.dim();
  const int64_t np = static_cast<int64_t>(pads.size());
  TCV_CHECK(np % 2 == 0, "[pad] pads ", shape_str(pads), " must come in (before, after) pairs");
  TCV_CHECK(np / 2 <= nd, "[pad] pads ", shape_str(pads), " cover ", np / 2,
            " dims but the input has shape ", x.shape_str());
  // pads run from the last dim backwards: {last_before, last_after, prev_before, ...}.
  Shape before(static_cast<size_t>(nd), 0), out_shape = x.shape();
  for (int64_t i = 0; i < np / 2; ++i) {
    const int64_t d = nd - 1 - i;
    const int64_t lo = pads[2 * i], hi = pads[2 * i + 1];
    const int64_t n = x.shape()[d];
    before[d] = lo;
    out_shape[d] = n + lo + hi;
    TCV_CHECK(out_shape[d] >= 0, "[pad] pads ", shape_str(pads), " give a negative size ",
              out_shape[d], " for dim ", d, " of shape ", x.shape_str());
    if (mode == PadMode::reflect)
      TCV_CHECK(lo < n && hi < n, "[pad] reflect pads ", lo, ", ", hi, " must be smaller than dim ",
                d, " of size ", n, " (input ", x.shape_str(), ")");
    if (mode == PadMode::replicate)
      TCV_CHECK(n > 0 || out_shape[d] == 0, "[pad] replicate cannot pad empty dim ", d,
                " of shape ", x.shape_str());
  }
  const auto kmode = static_cast<kernels::PadMode>(mode);
  if (nd == 0) return x.clone();
  Tensor in = x.detach().contiguous();
  Tensor out = empty(out_shape, {.dtype = x.dtype(), .device = x.device()});
  TCV_KERNEL(x.device(), pad, kmode, out.strided_desc(), in.strided_desc(), before.data(), value);
  if (autograd::needs_grad({&x}))
    autograd::record("pad", {x}, {out},
                     [kmode, before, in_shape = x.shape()](std::vector<Tensor>& g) {
                       Tensor dy = g[0].contiguous();
                       Tensor dx = empty(in_shape, {.dtype = dy.dtype(), .device = dy.device()});
                       TCV_KERNEL(dy.device(), pad_backward, kmode, dx.strided_desc(),
                                  dy.strided_desc(), before.data());
                       return std::vector<Tensor>{dx};
                     });
  return out;
}

}  // namespace tcv::ops
