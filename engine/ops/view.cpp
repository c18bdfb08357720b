// View ops: new geometry over the same storage, each with its gradient.
#include <algorithm>
#include <numeric>
#include <optional>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"

namespace tcv {

namespace {

// Infers one -1 entry of a requested shape.
Shape infer_shape(const Shape& req, int64_t numel, const char* op, const Shape& from) {
  Shape s = req;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      TCV_CHECK(infer < 0, "[", op, "] only one dim can be -1, got ", shape_str(req));
      infer = static_cast<int64_t>(i);
    } else {
      TCV_CHECK(s[i] >= 0, "[", op, "] invalid size in shape ", shape_str(req));
      known *= s[i];
    }
  }
  if (infer >= 0) {
    TCV_CHECK(known != 0 && numel % known == 0, "[", op, "] shape ", shape_str(req),
              " is invalid for input of shape ", shape_str(from));
    s[infer] = numel / known;
  }
  TCV_CHECK(shape_numel(s) == numel, "[", op, "] shape ", shape_str(req),
            " is invalid for input of shape ", shape_str(from), " (", numel, " elements)");
  return s;
}

// Strides for viewing a tensor with (sizes, strides) as `shape` without a copy,
// or empty when impossible (PyTorch's computeStride).
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& shape) {
  if (sizes.empty()) return contiguous_strides(shape);
  if (shape_numel(sizes) == 0) return contiguous_strides(shape);
  Shape out(shape.size());
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

void record_view(const char* name, const Tensor& in, const Tensor& out, BackwardFn fn) {
  autograd::record(name, {in}, {out}, std::move(fn));
}

}  // namespace

Tensor Tensor::view(const Shape& req) const {
  const Shape s = infer_shape(req, numel(), "view", shape());
  auto st = view_strides(shape(), strides(), s);
  TCV_CHECK(st.has_value(), "[view] cannot view shape ", shape_str(), " with strides ",
            tcv::shape_str(strides()), " as ", tcv::shape_str(s), "; use reshape");
  Tensor out = make_view(*this, s, *st, offset());
  if (autograd::needs_grad({this}))
    record_view("view", *this, out, [in_shape = shape()](std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].reshape(in_shape)};
    });
  return out;
}

Tensor Tensor::reshape(const Shape& req) const {
  const Shape s = infer_shape(req, numel(), "reshape", shape());
  if (view_strides(shape(), strides(), s)) return view(s);
  return contiguous().view(s);
}

Tensor Tensor::permute(const Shape& dims) const {
  TCV_CHECK(static_cast<int64_t>(dims.size()) == dim(), "[permute] ", dims.size(),
            " dims for a tensor of shape ", shape_str());
  Shape sz(dims.size()), st(dims.size()), inverse(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], "permute");
    TCV_CHECK(!seen[d], "[permute] repeated dim in ", tcv::shape_str(dims));
    seen[d] = true;
    sz[i] = shape()[d];
    st[i] = strides()[d];
    inverse[d] = static_cast<int64_t>(i);
  }
  Tensor out = make_view(*this, sz, st, offset());
  if (autograd::needs_grad({this}))
    record_view("permute", *this, out, [inverse](std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].permute(inverse)};
    });
  return out;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  Shape dims(static_cast<size_t>(dim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[wrap_dim(d0, "transpose")], dims[wrap_dim(d1, "transpose")]);
  return permute(dims);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d, "slice");
  TCV_CHECK(step > 0, "[slice] step must be positive, got ", step);
  const int64_t n = shape()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sz = shape(), st = strides();
  sz[d] = (end - start + step - 1) / step;
  st[d] *= step;
  Tensor out = make_view(*this, sz, st, offset() + start * strides()[d]);
  if (autograd::needs_grad({this}))
    record_view("slice", *this, out,
                [in_shape = shape(), dt = dtype(), dev = device(), d, start, end,
                 step](std::vector<Tensor>& g) {
                  Tensor dx = zeros(in_shape, {.dtype = dt, .device = dev});
                  dx.slice(d, start, end, step).copy_(g[0]);
                  return std::vector<Tensor>{dx};
                });
  return out;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_dim(d, "narrow");
  TCV_CHECK(start >= 0 && length >= 0 && start + length <= shape()[d], "[narrow] range [", start,
            ", ", start + length, ") out of bounds for dim ", d, " of shape ", shape_str());
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d, "select");
  const int64_t n = shape()[d];
  TCV_CHECK(index >= -n && index < n, "[select] index ", index, " out of range for dim ", d,
            " of shape ", shape_str());
  if (index < 0) index += n;
  return slice(d, index, index + 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& s) const {
  TCV_CHECK(static_cast<int64_t>(s.size()) >= dim(), "[expand] cannot expand shape ", shape_str(),
            " to ", tcv::shape_str(s));
  if (s == shape()) return *this;
  const int64_t lead = static_cast<int64_t>(s.size()) - dim();
  Shape sz(s.size()), st(s.size());
  for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
    if (i < lead) {
      sz[i] = s[i];
      st[i] = 0;
      continue;
    }
    const int64_t have = shape()[i - lead];
    const int64_t want = s[i] == -1 ? have : s[i];
    TCV_CHECK(have == want || have == 1, "[expand] cannot expand shape ", shape_str(), " to ",
              tcv::shape_str(s));
    sz[i] = want;
    st[i] = have == want ? strides()[i - lead] : 0;
  }
  Tensor out = make_view(*this, sz, st, offset());
  if (autograd::needs_grad({this}))
    record_view("expand", *this, out, [in_shape = shape()](std::vector<Tensor>& g) {
      return std::vector<Tensor>{ops::sum_to(g[0], in_shape)};
    });
  return out;
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, "squeeze");
  if (shape()[d] != 1) return *this;
  Shape s = shape();
  s.erase(s.begin() + d);
  return view(s);
}

Tensor Tensor::squeeze() const {
  Shape s;
  for (int64_t v : shape())
    if (v != 1) s.push_back(v);
  return view(s);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  const int64_t n = dim() + 1;
  const int64_t w = d < 0 ? d + n : d;
  TCV_CHECK(w >= 0 && w < n, "[unsqueeze] dim ", d, " out of range for shape ", shape_str());
  Shape s = shape();
  s.insert(s.begin() + w, 1);
  return view(s);
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  start = wrap_dim(start, "flatten");
  end = wrap_dim(end, "flatten");
  Shape s(shape().begin(), shape().begin() + start);
  int64_t m = 1;
  for (int64_t i = start; i <= end; ++i) m *= shape()[i];
  s.push_back(m);
  s.insert(s.end(), shape().begin() + end + 1, shape().end());
  return reshape(s);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return ops::clone(*this);
}

}  // namespace tcv
