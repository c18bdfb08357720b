// Tensor: a strided, typed view of reference-counted storage, with the
// autograd state that makes it differentiable.
#pragma once

#include <atomic>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/error.h"

namespace tcv::kernels {
/// The plain strided descriptor the engine hands its kernels (kernels/base.h);
/// only the engine's own sources look inside it.
struct KTensor;
}  // namespace tcv::kernels

namespace tcv {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);
/// Row-major strides of a shape.
Shape contiguous_strides(const Shape& s);

/// Bytes on one device; freed when the last view dies. Views share the
/// version counter that detects in-place changes to tensors saved for backward.
///
/// A CPU storage may hold a 4-D activation in the layout the CPU convolutions
/// compute in, oneDNN's nChw16c or nChw8c for f32, channels-last for bf16
/// (kernels/cpu/blocked.h; blocked(), see Tensor::is_blocked). Reading it
/// row-major takes an explicit step, make_row_major(), which converts once into
/// a second buffer; the blocked bytes stay valid until the storage dies, so a
/// kernel that took them
/// (blocked_bytes()) in one thread reads correct values while another thread
/// converts. Accessors never convert.
class Storage {
 public:
  Storage(size_t nbytes, Device device);
  /// Wraps memory owned elsewhere (e.g. a mapped file); `deleter` frees it.
  Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// The bytes in row-major layout. Throws while the storage is still blocked:
  /// call make_row_major() first.
  void* data() const;
  /// The blocked bytes of a storage that was declared blocked (mark_blocked),
  /// whether or not it has been converted since.
  void* blocked_bytes() const;
  /// Converts a blocked storage to row-major (once; safe from several threads at
  /// a time) and returns data(). A no-op for a storage that is not blocked.
  void* make_row_major() const;
  size_t nbytes() const { return nbytes_; }
  /// Whether the bytes are still only in the blocked layout: written so by a
  /// kernel that produces it, and not yet converted by make_row_major().
  bool blocked() const { return blocked_.load(std::memory_order_acquire); }
  /// Declares the (not yet read) bytes blocked for the logical (N, C, H, W)
  /// `dims` of `dtype` (f32: nChw16c or nChw8c; bf16: channels last).
  void mark_blocked(const std::vector<int64_t>& dims, DType dtype = DType::f32);
  /// The dtype the storage was declared blocked with (f32 when never).
  DType blocked_dtype() const { return blocked_dtype_; }
  Device device() const { return device_; }
  uint32_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_ = nullptr;  // the allocation; blocked bytes when marked blocked
  size_t nbytes_ = 0;
  Device device_;
  std::function<void(void*)> deleter_;
  std::atomic<uint32_t> version_{0};
  mutable std::atomic<bool> blocked_{false};
  bool was_blocked_ = false;
  std::vector<int64_t> blocked_dims_;
  DType blocked_dtype_ = DType::f32;
  mutable void* row_major_ = nullptr;  // the converted bytes of a blocked storage
  mutable std::mutex convert_mu_;
};

/// How a new tensor is made: `zeros({2, 3}, {.dtype = DType::f64})`.
struct TensorOptions {
  DType dtype = DType::f32;
  Device device = kCPU;
  bool requires_grad = false;
  /// CPU only: page-locked memory, so copies to a GPU run asynchronously on
  /// the copy stream (ignored in builds or on machines without CUDA).
  bool pinned = false;
};

class Node;
class Tensor;
struct AutogradMeta;

using PostAccumulateGradHook = std::function<void(Tensor&)>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;
  int64_t offset = 0;
  DType dtype = DType::f32;
  std::unique_ptr<AutogradMeta> autograd;  // null for tensors that never saw autograd

  TensorImpl();
  ~TensorImpl();
};

/// A handle to a TensorImpl: copies share the tensor (like torch.Tensor).
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- metadata ----
  const Shape& shape() const { return impl().sizes; }
  const Shape& strides() const { return impl().strides; }
  /// Size of one dimension; negative dims count from the end.
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t offset() const { return impl().offset; }
  int64_t dim() const { return static_cast<int64_t>(impl().sizes.size()); }
  int64_t numel() const { return shape_numel(impl().sizes); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  size_t element_size() const { return dtype_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  std::string shape_str() const { return tcv::shape_str(shape()); }
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  /// Wraps a (possibly negative) dim into [0, dim()), naming the op on error.
  int64_t wrap_dim(int64_t d, const char* op = "dim") const;

  // ---- data ----
  /// The first element, in row-major strided memory: a storage still in the
  /// blocked layout is converted first (Storage::make_row_major). Writing
  /// through it is not seen by the version counter: code that changes a
  /// parameter's values this way calls bump_version() afterwards (evaluation
  /// keeps CPU convolution weights in oneDNN's layout while the version holds).
  void* data_ptr() const;
  template <typename T>
  T* data() const;
  /// The single element of a one-element tensor, converted to double.
  double item() const;
  template <typename T>
  T item() const {
    return static_cast<T>(item());
  }
  /// Copies the elements (any layout) out as a flat vector of T.
  template <typename T>
  std::vector<T> to_vector() const;
  /// The kernel descriptor (data pointer, dtype, sizes and strides) of this view's
  /// elements, what every kernel call takes. Strided row-major memory: a storage
  /// still in the blocked layout is converted first.
  kernels::KTensor strided_desc() const;

  // ---- the blocked layout (CPU f32 and bf16 activations) ----
  /// True when this tensor is a whole 4-D f32 or bf16 storage held in the
  /// layout CPU convolutions compute in (nChw16c or nChw8c for f32, channels last for
  /// bf16: kernels/cpu/blocked.h): CPU convolutions write their outputs so, and batch norm and
  /// elementwise ops on equal shapes keep it, so no reorder runs between those
  /// layers. Any other access (data_ptr, strided_desc, to_vector, a kernel that
  /// does not know the layout) converts the storage to row-major first, once
  /// (Storage::make_row_major); code that does not ask never sees the layout.
  bool is_blocked() const;
  /// The kernel descriptor of the bytes as they are stored: for a blocked tensor
  /// the blocked bytes with kt.blocked set (for kernels that read that layout);
  /// the same as strided_desc() otherwise. One look at the layout: an op decides
  /// on kt.blocked, not on an earlier is_blocked(), since another thread may
  /// convert the storage in between (the bytes it returned stay valid).
  kernels::KTensor desc_as_stored() const;

  // ---- views (differentiable; share storage) ----
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& shape) const;
  Tensor squeeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor contiguous() const;
  /// A copy in page-locked host memory (this tensor itself when it already is).
  Tensor pin_memory() const;
  bool is_pinned() const;

  // ---- conversion ----
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor clone() const;
  /// Same data, cut from the graph.
  Tensor detach() const;

  // ---- in place (bump the version counter; not recorded by autograd) ----
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& copy_(const Tensor& src);
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& mul_(double value);
  Tensor& mul_(const Tensor& other);
  /// Makes this tensor (and every handle to it) use `src`'s data and geometry:
  /// how Module::to() moves parameters without invalidating handles.
  void set_data(const Tensor& src) const;
  uint32_t version() const { return impl().storage->version(); }
  void bump_version() const { impl().storage->bump_version(); }

  // ---- autograd ----
  bool requires_grad() const;
  Tensor& set_requires_grad(bool r);
  /// Accumulated gradient of a leaf (undefined until the first backward).
  Tensor grad() const;
  void set_grad(const Tensor& g);
  const std::shared_ptr<Node>& grad_fn() const;
  bool is_leaf() const;
  /// Backpropagates from this tensor; `grad` defaults to 1 for a scalar.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  /// Runs after a gradient was accumulated into this leaf's .grad; returns a handle id.
  int register_post_accumulate_grad_hook(PostAccumulateGradHook hook);
  void remove_post_accumulate_grad_hook(int handle);

  // ---- printing ----
  std::string str() const;

  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  AutogradMeta& autograd_meta() const;  // creates it on first use

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

/// Autograd state of a tensor: its gradient, the node that made it, hooks.
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;
  uint32_t output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;
  std::vector<std::pair<int, PostAccumulateGradHook>> post_acc_hooks;
  int next_hook_id = 0;
};

/// A tensor over `storage` with the given geometry (no copy).
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset);
/// An uninitialised tensor.
Tensor empty(const Shape& shape, TensorOptions opts = {});
/// An uninitialized CPU (N, C, H, W) tensor of `dtype` whose storage is declared
/// blocked (blockable() must allow it): for kernels that write that layout.
Tensor empty_blocked(const Shape& shape, DType dtype = DType::f32);
/// t (a CPU 4-D tensor that blockable() allows) in the blocked layout: t itself
/// when it already is, else a converted copy (outside autograd).
Tensor to_blocked(const Tensor& t);
/// A 1-D kernel descriptor over all of a contiguous tensor's elements in memory
/// order, blocked or not: for elementwise kernels on operands of one layout.
kernels::KTensor flat_desc(const Tensor& t);
/// The same over a descriptor taken before (desc_as_stored() of a contiguous or
/// blocked tensor).
kernels::KTensor flat_desc(kernels::KTensor kt);
/// Whether a tensor of this shape, dtype and device may be held blocked.
bool blockable(const Shape& shape, DType dtype, Device device);
Tensor empty_like(const Tensor& t);
Tensor empty_like(const Tensor& t, DType dtype);
Tensor zeros(const Shape& shape, TensorOptions opts = {});
Tensor zeros_like(const Tensor& t);
Tensor ones(const Shape& shape, TensorOptions opts = {});
Tensor ones_like(const Tensor& t);
Tensor full(const Shape& shape, double value, TensorOptions opts = {});
Tensor full_like(const Tensor& t, double value);
/// [start, end) in steps; i64 unless opts say otherwise.
Tensor arange(double start, double end, double step = 1.0,
              TensorOptions opts = {.dtype = DType::i64});
Tensor arange(int64_t end, TensorOptions opts = {.dtype = DType::i64});
/// A tensor holding a copy of `values` in the given shape (1-D when `shape` is
/// empty); the dtype follows T (float -> f32, double -> f64, int64_t -> i64, ...).
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape = {}, Device device = kCPU);
/// A 0-d tensor.
Tensor scalar_tensor(double value, TensorOptions opts = {});

}  // namespace tcv
