// oneDNN plumbing shared by the CPU convolution, pooling and batch-norm kernels:
// the engine and stream singletons, grow-only per-thread buffers, and a cache
// of primitives keyed by shapes and parameters.
//
// Only kernels/cpu/*.cpp include this header; nothing above kernels/ sees oneDNN.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels/base.h"

namespace tcv::kernels::cpu::dnnl_util {

/// The process-wide CPU engine (OpenMP runtime, as Debian's libdnnl is built).
dnnl::engine& engine();
/// A stream per thread: oneDNN streams are not meant to be shared across threads.
dnnl::stream& stream();

/// Buffers a primitive call needs for the duration of that call only.
enum class Buf : int {
  scratchpad,
  src,
  weights,
  dst,
  diff_dst,
  diff_src,
  diff_weights,
  bwd_src,
  winograd_filters,  // kernels/cpu/winograd.cpp: the transformed filters,
  winograd_tiles,    // each thread's block of transformed tiles,
  winograd_sums,     // and the threads' weight-gradient sums
  count
};

/// A per-thread buffer for `slot` of at least `bytes` (64-byte aligned). It grows
/// and is never freed, so steady-state training allocates nothing here.
void* buffer(Buf slot, size_t bytes);

/// Attributes every tcv primitive uses: user-managed scratchpad (from buffer()).
dnnl::primitive_attr default_attr();

/// A memory object over `data` (no copy).
inline dnnl::memory wrap(const dnnl::memory::desc& md, void* data) {
  return dnnl::memory(md, engine(), data);
}

/// oneDNN's name for f32 and bf16 (the dtypes tcv hands it).
inline dnnl::memory::data_type dnnl_dtype(DType dt) {
  TCV_CHECK(dt == DType::f32 || dt == DType::bf16, "[dnnl] f32 or bf16 expected, got ",
            dtype_name(dt));
  return dt == DType::bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

/// Plain (row-major) memory descriptor, f32 unless said otherwise.
inline dnnl::memory::desc plain_md(const dnnl::memory::dims& dims,
                                   dnnl::memory::data_type dt = dnnl::memory::data_type::f32) {
  dnnl::memory::dims strides(dims.size());
  int64_t s = 1;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= dims[i];
  }
  return dnnl::memory::desc(dims, dt, strides);
}

/// The blocked layout of `dtype` (kernels/cpu/blocked.h): f32 nChw16c or
/// nChw8c (channel_block()), bf16 channels last.
dnnl::memory::desc blocked_md(const dnnl::memory::dims& dims, DType dtype);

/// Whether oneDNN runs bf16 on this CPU in hardware: AVX512_BF16 or AMX-BF16
/// in the ISA it dispatches to (ONEDNN_MAX_CPU_ISA can lower it).
bool bf16_in_hardware();

/// A tensor that lives in a caller-visible plain layout but that a primitive
/// may want in another (blocked) one: the two descriptors and cached reorders.
struct Layout {
  dnnl::memory::desc plain;
  dnnl::memory::desc want;
  std::unique_ptr<dnnl::reorder> to_want;   // plain -> want; null when equal
  std::unique_ptr<dnnl::reorder> to_plain;  // want -> plain; null when equal
  Layout() = default;
  Layout(const dnnl::memory::desc& plain_md, const dnnl::memory::desc& want_md, bool in, bool out);
  bool same() const { return plain == want; }
  /// Memory in the wanted layout holding `data`'s values: `data` itself, or the
  /// per-thread buffer `slot` after a reorder.
  dnnl::memory in(void* data, Buf slot) const;
  /// Memory in the wanted layout to write into: `data` itself, or buffer `slot`.
  dnnl::memory out(void* data, Buf slot) const;
  /// Copies `m` (from out()) back into `data` when a reorder is needed.
  void finish(dnnl::memory m, void* data) const;
  /// The same three for a kernel tensor: one already in the blocked layout
  /// (t.blocked, which the caller has checked is `want`) is used as it is.
  dnnl::memory in(const KTensor& t, Buf slot) const;
  dnnl::memory out(const KTensor& t, Buf slot) const;
  void finish(dnnl::memory m, const KTensor& t) const;
};

/// Scratchpad memory large enough for `pd`.
dnnl::memory scratchpad(const dnnl::primitive_desc_base& pd);

/// Key of a cached primitive set: an op tag followed by shapes and parameters.
using Key = std::vector<int64_t>;

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

/// Primitives built once per key and reused by every later call with that key.
template <typename Entry>
class Cache {
 public:
  const Entry& get(const Key& key, const std::function<std::unique_ptr<Entry>()>& make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.find(key);
      if (it != map_.end()) return *it->second;
    }
    // Build outside the lock (it can take milliseconds); the first insert wins.
    std::unique_ptr<Entry> e = make();
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = map_.emplace(key, std::move(e));
    return *it->second;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.size();
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<Key, std::unique_ptr<Entry>, KeyHash> map_;
};

/// Rethrows a dnnl::error as tcv::Error naming the op.
[[noreturn]] void rethrow(const char* op, const dnnl::error& e);

}  // namespace tcv::kernels::cpu::dnnl_util
