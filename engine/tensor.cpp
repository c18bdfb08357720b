#include "engine/tensor.h"

#include "kernels/cpu/blocked.h"
#include "kernels/cpu/conv.h"
#include "kernels/cuda/runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <numeric>
#include <sstream>

#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/profiler.h"

namespace tcv {

// ---------------------------------------------------------------- shapes

std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + ")";
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (int64_t i = static_cast<int64_t>(s.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

// ---------------------------------------------------------------- storage

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = backend::allocate(nbytes, device);
}

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter)
    : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)) {}

Storage::~Storage() {
  // Weights the convolutions keep in their layout are keyed by address.
  if (device_.is_cpu()) kernels::cpu::conv2d_forget_weights(data_, nbytes_);
  if (row_major_) backend::deallocate(row_major_, nbytes_, device_);
  if (deleter_) {
    deleter_(data_);
  } else {
    backend::deallocate(data_, nbytes_, device_);
  }
}

void Storage::mark_blocked(const std::vector<int64_t>& dims, DType dtype) {
  TCV_CHECK(dims.size() == 4 && device_.is_cpu() && (dtype == DType::f32 || dtype == DType::bf16) &&
                static_cast<size_t>(shape_numel(dims)) * dtype_size(dtype) == nbytes_,
            "[tensor] a blocked storage holds one 4-D f32 or bf16 tensor, got ", shape_str(dims),
            " ", dtype_name(dtype), " over ", nbytes_, " bytes");
  TCV_CHECK(!was_blocked_, "[tensor] a storage is declared blocked once, when it is made");
  blocked_dims_ = dims;
  blocked_dtype_ = dtype;
  was_blocked_ = true;
  blocked_.store(true, std::memory_order_release);
}

void* Storage::data() const {
  TCV_CHECK(!blocked(), "[tensor] the storage holds blocked bytes (", shape_str(blocked_dims_),
            "): make_row_major() converts them before a row-major read");
  // After a conversion the row-major bytes are the second buffer; blocked()'s
  // acquire orders this read after its publication.
  return was_blocked_ ? row_major_ : data_;
}

void* Storage::blocked_bytes() const {
  TCV_CHECK(was_blocked_, "[tensor] blocked_bytes() of a storage that was never blocked");
  return data_;
}

// Converts into a new buffer and keeps the blocked one until the storage dies:
// a kernel in another thread may be reading it (it took blocked_bytes() while
// the storage was still blocked).
void* Storage::make_row_major() const {
  if (blocked()) [[unlikely]] {
    std::lock_guard<std::mutex> lock(convert_mu_);
    if (blocked_.load(std::memory_order_relaxed)) {
      void* plain = backend::allocate(nbytes_, device_);
      profiler::Scope prof("blocked_to_nchw", device_);
      kernels::cpu::blocked_to_nchw(blocked_dims_.data(), blocked_dtype_, data_, plain);
      row_major_ = plain;
      blocked_.store(false, std::memory_order_release);
    }
  }
  return data();
}

TensorImpl::TensorImpl() = default;
TensorImpl::~TensorImpl() = default;

// ---------------------------------------------------------------- metadata

TensorImpl& Tensor::impl() const {
  TCV_CHECK(impl_ != nullptr, "[tensor] use of an undefined tensor");
  return *impl_;
}

AutogradMeta& Tensor::autograd_meta() const {
  auto& i = impl();
  if (!i.autograd) i.autograd = std::make_unique<AutogradMeta>();
  return *i.autograd;
}

int64_t Tensor::wrap_dim(int64_t d, const char* op) const {
  const int64_t n = dim();
  const int64_t w = d < 0 ? d + n : d;
  TCV_CHECK(w >= 0 && w < std::max<int64_t>(n, 1), "[", op, "] dim ", d, " out of range for a ", n,
            "-d tensor of shape ", shape_str());
  return w;
}

int64_t Tensor::size(int64_t d) const {
  return shape()[wrap_dim(d, "size")];
}
int64_t Tensor::stride(int64_t d) const {
  return strides()[wrap_dim(d, "stride")];
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  const auto& sz = shape();
  const auto& st = strides();
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (sz[i] != 1 && st[i] != expected) return false;
    expected *= sz[i];
  }
  return true;
}

void* Tensor::data_ptr() const {
  auto& i = impl();
  void* base = i.storage->make_row_major();
  if (base == nullptr) return nullptr;
  return static_cast<char*>(base) + i.offset * static_cast<int64_t>(dtype_size(i.dtype));
}

namespace {
template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  if constexpr (std::is_same_v<T, double>) return DType::f64;
  if constexpr (std::is_same_v<T, Half>) return DType::f16;
  if constexpr (std::is_same_v<T, BFloat16>) return DType::bf16;
  if constexpr (std::is_same_v<T, int32_t>) return DType::i32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::i64;
  if constexpr (std::is_same_v<T, uint8_t>) return DType::u8;
  if constexpr (std::is_same_v<T, bool>) return DType::b8;
}
}  // namespace

template <typename T>
T* Tensor::data() const {
  TCV_CHECK(dtype() == dtype_of<T>(), "[tensor] data<", dtype_name(dtype_of<T>()),
            ">() on a tensor of dtype ", dtype_name(dtype()));
  return static_cast<T*>(data_ptr());
}

#define TCV_INSTANTIATE(T)                              \
  template T* Tensor::data<T>() const;                  \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template Tensor from_vector<T>(const std::vector<T>&, const Shape&, Device);

double Tensor::item() const {
  TCV_CHECK(numel() == 1, "[item] needs a one-element tensor, got shape ", shape_str());
  Tensor c = to(kCPU).to(DType::f64);
  return *static_cast<const double*>(c.data_ptr());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = to(kCPU).to(dtype_of<T>()).contiguous();
  const T* p = static_cast<const T*>(c.data_ptr());
  return std::vector<T>(p, p + c.numel());
}

kernels::KTensor Tensor::strided_desc() const {
  kernels::KTensor kt;
  TCV_CHECK(dim() <= kernels::kMaxDims, "[tensor] kernels take at most ", kernels::kMaxDims,
            " dims, got shape ", shape_str());
  kt.data = data_ptr();
  kt.dtype = dtype();
  kt.ndim = static_cast<int>(dim());
  for (int i = 0; i < kt.ndim; ++i) {
    kt.sizes[i] = shape()[i];
    kt.strides[i] = strides()[i];
  }
  return kt;
}

bool Tensor::is_blocked() const {
  const auto& i = impl();
  return i.storage->blocked() && i.offset == 0 && dim() == 4 &&
         i.dtype == i.storage->blocked_dtype() && nbytes() == i.storage->nbytes() &&
         is_contiguous();
}

kernels::KTensor Tensor::desc_as_stored() const {
  if (!is_blocked()) return strided_desc();
  kernels::KTensor kt;
  kt.data = impl().storage->blocked_bytes();
  kt.dtype = dtype();
  kt.ndim = 4;
  const Shape st = contiguous_strides(shape());
  for (int i = 0; i < 4; ++i) {
    kt.sizes[i] = shape()[i];
    kt.strides[i] = st[i];
  }
  kt.blocked = true;
  return kt;
}

// ---------------------------------------------------------------- creation

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

Tensor empty(const Shape& shape, TensorOptions opts) {
  // The strides multiply every size (a zero one counts as 1) and the byte count
  // every size and the element size: both must fit in int64.
  int64_t span = static_cast<int64_t>(dtype_size(opts.dtype));
  for (int64_t s : shape) {
    TCV_CHECK(s >= 0, "[empty] negative size in shape ", shape_str(shape));
    TCV_CHECK(!__builtin_mul_overflow(span, std::max<int64_t>(s, 1), &span), "[empty] shape ",
              shape_str(shape), " of ", dtype_name(opts.dtype), " is too large to address");
  }
  auto impl = std::make_shared<TensorImpl>();
  const size_t nbytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(opts.dtype);
  if (opts.pinned && opts.device.is_cpu() && nbytes > 0 && kernels::cuda::device_count() > 0)
    impl->storage = std::make_shared<Storage>(kernels::cuda::pinned_malloc(nbytes), nbytes, kCPU,
                                              [](void* p) { kernels::cuda::pinned_free(p); });
  else
    impl->storage = std::make_shared<Storage>(nbytes, opts.device);
  impl->sizes = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = opts.dtype;
  Tensor t(std::move(impl));
  if (opts.requires_grad) t.set_requires_grad(true);
  return t;
}

kernels::KTensor flat_desc(const Tensor& t) {
  TCV_CHECK(t.is_contiguous(), "[flat_desc] needs a contiguous tensor, got strides ",
            shape_str(t.strides()));
  return flat_desc(t.desc_as_stored());
}

kernels::KTensor flat_desc(kernels::KTensor kt) {
  TCV_CHECK(kt.blocked || kt.is_contiguous(), "[flat_desc] needs a contiguous or blocked tensor");
  const int64_t n = kt.numel();
  kt.ndim = 1;
  kt.sizes[0] = n;
  kt.strides[0] = 1;
  kt.blocked = false;
  return kt;
}

bool blockable(const Shape& shape, DType dtype, Device device) {
  if (shape.size() != 4 || !device.is_cpu() || shape[1] <= 0 || shape_numel(shape) <= 0)
    return false;
  if (dtype == DType::f32) return kernels::cpu::whole_channel_blocks(shape[1]);
  return dtype == DType::bf16 && kernels::cpu::bf16_supported();  // channels last
}

Tensor empty_blocked(const Shape& shape, DType dtype) {
  TCV_CHECK(blockable(shape, dtype, kCPU),
            "[empty_blocked] needs (N, C, H, W) f32 with C a multiple of ",
            kernels::cpu::channel_block(), ", or bf16 on a CPU with bf16 instructions, got ",
            shape_str(shape), " ", dtype_name(dtype));
  Tensor t = empty(shape, {.dtype = dtype});
  t.storage()->mark_blocked(shape, dtype);
  return t;
}

Tensor to_blocked(const Tensor& t) {
  if (t.is_blocked()) return t;
  TCV_CHECK(blockable(t.shape(), t.dtype(), t.device()),
            "[to_blocked] needs a CPU (N, C, H, W) tensor, f32 with C a multiple of ",
            kernels::cpu::channel_block(), " or bf16, got ", t.shape_str(), " ",
            dtype_name(t.dtype()));
  const Tensor src = t.detach().contiguous();
  Tensor out = empty_blocked(t.shape(), t.dtype());
  profiler::Scope prof("nchw_to_blocked", t.device());
  kernels::cpu::nchw_to_blocked(t.shape().data(), t.dtype(), src.data_ptr(),
                                out.storage()->blocked_bytes());
  return out;
}

Tensor empty_like(const Tensor& t) {
  return empty(t.shape(), {.dtype = t.dtype(), .device = t.device()});
}
Tensor empty_like(const Tensor& t, DType dtype) {
  return empty(t.shape(), {.dtype = dtype, .device = t.device()});
}

Tensor full(const Shape& shape, double value, TensorOptions opts) {
  const bool rg = opts.requires_grad;
  opts.requires_grad = false;
  Tensor t = empty(shape, opts);
  t.fill_(value);
  if (rg) t.set_requires_grad(true);
  return t;
}

Tensor zeros(const Shape& shape, TensorOptions opts) {
  return full(shape, 0.0, opts);
}
Tensor ones(const Shape& shape, TensorOptions opts) {
  return full(shape, 1.0, opts);
}
Tensor zeros_like(const Tensor& t) {
  return full_like(t, 0.0);
}
Tensor ones_like(const Tensor& t) {
  return full_like(t, 1.0);
}
Tensor full_like(const Tensor& t, double value) {
  return full(t.shape(), value, {.dtype = t.dtype(), .device = t.device()});
}
Tensor scalar_tensor(double value, TensorOptions opts) {
  return full({}, value, opts);
}

Tensor arange(double start, double end, double step, TensorOptions opts) {
  TCV_CHECK(step != 0, "[arange] step must be non-zero");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end - start) / step)));
  Tensor t = empty({n}, {.dtype = DType::f64});
  double* p = t.data<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = start + static_cast<double>(i) * step;
  Tensor r = t.to(opts.dtype).to(opts.device);
  if (opts.requires_grad) r.set_requires_grad(true);
  return r;
}

Tensor arange(int64_t end, TensorOptions opts) {
  return arange(0.0, static_cast<double>(end), 1.0, opts);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  Shape s = shape.empty() ? Shape{static_cast<int64_t>(values.size())} : shape;
  TCV_CHECK(shape_numel(s) == static_cast<int64_t>(values.size()), "[from_vector] ", values.size(),
            " values do not fill shape ", shape_str(s));
  Tensor t = empty(s, {.dtype = dtype_of<T>()});
  if constexpr (std::is_same_v<T, bool>) {
    bool* p = t.data<bool>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  } else if (!values.empty()) {
    std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(T));
  }
  return device.is_cpu() ? t : t.to(device);
}

// ---------------------------------------------------------------- conversion

Tensor Tensor::to(DType dt) const {
  if (dt == dtype()) return *this;
  return ops::cast(*this, dt);
}

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  return ops::to_device(*this, d);
}

Tensor Tensor::pin_memory() const {
  TCV_CHECK(device().is_cpu(), "[pin_memory] needs a CPU tensor, got one on ", device().str());
  if (is_pinned() || kernels::cuda::device_count() == 0) return *this;
  Tensor out = empty(shape(), {.dtype = dtype(), .pinned = true});
  out.copy_(*this);
  return out;
}

bool Tensor::is_pinned() const {
  return defined() && device().is_cpu() && kernels::cuda::is_pinned(data_ptr());
}

Tensor Tensor::clone() const {
  return ops::clone(*this);
}

Tensor Tensor::detach() const {
  Tensor t = make_view(*this, shape(), strides(), offset());
  return t;
}

void Tensor::set_data(const Tensor& src) const {
  TensorImpl& i = impl();
  const TensorImpl& s = src.impl();
  i.storage = s.storage;
  i.sizes = s.sizes;
  i.strides = s.strides;
  i.offset = s.offset;
  i.dtype = s.dtype;
}

Tensor& Tensor::fill_(double value) {
  backend::fill(*this, value);
  bump_version();
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  TCV_CHECK(src.dim() <= dim(), "[copy_] cannot copy shape ", src.shape_str(), " into ",
            shape_str());
  backend::copy(*this, src.expand(shape()).detach());
  bump_version();
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  backend::binary_inplace(kernels::BinaryOp::add, *this, other, alpha);
  bump_version();
  return *this;
}

Tensor& Tensor::mul_(const Tensor& other) {
  backend::binary_inplace(kernels::BinaryOp::mul, *this, other, 1.0);
  bump_version();
  return *this;
}

Tensor& Tensor::mul_(double value) {
  return mul_(scalar_tensor(value, {.dtype = dtype(), .device = device()}));
}

// ---------------------------------------------------------------- autograd

bool Tensor::requires_grad() const {
  return impl().autograd != nullptr && impl().autograd->requires_grad;
}

Tensor& Tensor::set_requires_grad(bool r) {
  if (r) {
    TCV_CHECK(is_floating(dtype()), "[requires_grad] only floating tensors can require grad, got ",
              dtype_name(dtype()));
  }
  autograd_meta().requires_grad = r;
  return *this;
}

Tensor Tensor::grad() const {
  if (!impl().autograd) return Tensor();
  return impl().autograd->grad;
}

void Tensor::set_grad(const Tensor& g) {
  if (g.defined()) {
    TCV_CHECK(g.shape() == shape(), "[set_grad] gradient of shape ", g.shape_str(),
              " for a tensor of shape ", shape_str());
  }
  autograd_meta().grad = g;
}

const std::shared_ptr<Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<Node> none;
  if (!impl().autograd) return none;
  return impl().autograd->grad_fn;
}

bool Tensor::is_leaf() const {
  return grad_fn() == nullptr;
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  autograd::backward({*this}, {grad}, retain_graph);
}

int Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) {
  TCV_CHECK(is_leaf() && requires_grad(),
            "[register_post_accumulate_grad_hook] only leaves that require grad accumulate "
            "gradients");
  auto& m = autograd_meta();
  const int id = m.next_hook_id++;
  m.post_acc_hooks.emplace_back(id, std::move(hook));
  return id;
}

void Tensor::remove_post_accumulate_grad_hook(int handle) {
  auto& hooks = autograd_meta().post_acc_hooks;
  std::erase_if(hooks, [handle](const auto& h) { return h.first == handle; });
}

// ---------------------------------------------------------------- printing

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream os;
  Tensor c = to(kCPU).contiguous();
  const bool fp = is_floating(dtype());
  Tensor d = c.to(DType::f64);
  const double* p = d.data<double>();
  const int64_t n = c.numel();
  // Pick fixed or scientific notation from the range of values, like PyTorch.
  double maxabs = 0, minabs = INFINITY;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(p[i]) && p[i] != 0) {
      maxabs = std::max(maxabs, std::abs(p[i]));
      minabs = std::min(minabs, std::abs(p[i]));
    }
  const bool sci = fp && n > 0 && (maxabs >= 1e8 || (minabs < 1e-4 && maxabs > 0));
  auto fmt = [&](double v) {
    char buf[64];
    if (dtype() == DType::b8)
      std::snprintf(buf, sizeof buf, "%s", v != 0 ? "true" : "false");
    else if (!fp)
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    else if (sci)
      std::snprintf(buf, sizeof buf, "%.4e", v);
    else
      std::snprintf(buf, sizeof buf, "%.4f", v);
    return std::string(buf);
  };
  const auto& sz = c.shape();
  const int64_t nd = c.dim();
  const int64_t edge = 3;
  const bool summarize = n > 1000;
  // Recursive printer over dims, eliding the middle of long dims when summarizing.
  std::function<void(int64_t, int64_t)> rec = [&](int64_t dim, int64_t base) {
    if (dim == nd) {
      os << fmt(p[base]);
      return;
    }
    const int64_t len = sz[dim];
    const int64_t stride = c.strides()[dim];
    os << "[";
    for (int64_t i = 0; i < len; ++i) {
      if (summarize && len > 2 * edge && i == edge) {
        os << "...";
        i = len - edge - 1;
        os << (dim + 1 == nd ? ", " : ",\n" + std::string(static_cast<size_t>(dim + 8), ' '));
        continue;
      }
      if (i > 0)
        os << (dim + 1 == nd ? ", " : ",\n" + std::string(static_cast<size_t>(dim + 8), ' '));
      rec(dim + 1, base + i * stride);
    }
    os << "]";
  };
  os << "tensor(";
  if (n == 0)
    os << "[]";
  else
    rec(0, 0);
  os << ", shape=" << shape_str() << ", dtype=" << dtype_name(dtype());
  if (!device().is_cpu()) os << ", device=" << device().str();
  if (requires_grad()) os << ", requires_grad";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  return os << t.str();
}

TCV_INSTANTIATE(float)
TCV_INSTANTIATE(double)
TCV_INSTANTIATE(Half)
TCV_INSTANTIATE(BFloat16)
TCV_INSTANTIATE(int32_t)
TCV_INSTANTIATE(int64_t)
TCV_INSTANTIATE(uint8_t)
TCV_INSTANTIATE(bool)

}  // namespace tcv
