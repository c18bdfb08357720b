#include "kernels/cpu/blocked.h"

#include "kernels/cpu/dnnl_common.h"

namespace tcv::kernels::cpu {

namespace {

using dnnl::memory;
using namespace dnnl_util;

struct ReorderEntry {
  memory::desc src, dst;
  dnnl::reorder reorder;
};

Cache<ReorderEntry>& reorder_cache() {
  static Cache<ReorderEntry> cache;
  return cache;
}

void run(const int64_t dims[4], DType dtype, const void* src, void* dst, bool to_blocked) {
  const Key key{dims[0], dims[1], dims[2], dims[3], to_blocked, static_cast<int64_t>(dtype)};
  const ReorderEntry& e = reorder_cache().get(key, [&] {
    const memory::dims d{dims[0], dims[1], dims[2], dims[3]};
    const auto dt = dnnl_dtype(dtype);
    const memory::desc plain = plain_md(d, dt);
    const memory::desc blocked = blocked_md(d, dtype);
    auto r = std::make_unique<ReorderEntry>();
    r->src = to_blocked ? plain : blocked;
    r->dst = to_blocked ? blocked : plain;
    r->reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), r->src, engine(), r->dst));
    return r;
  });
  try {
    memory s = wrap(e.src, const_cast<void*>(src)), t = wrap(e.dst, dst);
    e.reorder.execute(stream(), s, t);
  } catch (const dnnl::error& err) {
    rethrow(to_blocked ? "to_blocked" : "from_blocked", err);
  }
}

}  // namespace

int64_t channel_block() {
  // What a 3x3 convolution of 32 channels, every layout left to oneDNN, writes.
  static const int64_t block = [] {
    try {
      const memory::dims x{2, 32, 8, 8}, w{32, 32, 3, 3};
      const auto f32 = memory::data_type::f32;
      const memory::desc x_any(x, f32, memory::format_tag::any),
          w_any(w, f32, memory::format_tag::any);
      const dnnl::convolution_forward::primitive_desc pd(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                          dnnl::algorithm::convolution_direct, x_any, w_any, x_any,
                                          {1, 1}, {1, 1}, {1, 1}),
          engine());
      if (pd.dst_desc() == memory::desc(x, f32, memory::format_tag::nChw16c)) return int64_t{16};
      if (pd.dst_desc() == memory::desc(x, f32, memory::format_tag::nChw8c)) return int64_t{8};
    } catch (const dnnl::error&) {
      // No convolution kernel to ask: row-major below.
    }
    return int64_t{0};
  }();
  return block;
}

bool whole_channel_blocks(int64_t channels) {
  return channel_block() > 0 && channels % channel_block() == 0;
}

namespace dnnl_util {

memory::desc blocked_md(const memory::dims& dims, DType dtype) {
  if (dtype == DType::bf16)
    return memory::desc(dims, memory::data_type::bf16, memory::format_tag::nhwc);
  TCV_CHECK(channel_block() > 0, "[blocked] no f32 blocked layout on this CPU");
  return memory::desc(
      dims, dnnl_dtype(dtype),
      channel_block() == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c);
}

}  // namespace dnnl_util

void nchw_to_blocked(const int64_t dims[4], DType dtype, const void* src, void* dst) {
  run(dims, dtype, src, dst, true);
}

void blocked_to_nchw(const int64_t dims[4], DType dtype, const void* src, void* dst) {
  run(dims, dtype, src, dst, false);
}

}  // namespace tcv::kernels::cpu
