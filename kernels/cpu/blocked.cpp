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
    const memory::desc blocked(
        d, dt, dtype == DType::bf16 ? memory::format_tag::nhwc : memory::format_tag::nChw16c);
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

void nchw_to_blocked(const int64_t dims[4], DType dtype, const void* src, void* dst) {
  run(dims, dtype, src, dst, true);
}

void blocked_to_nchw(const int64_t dims[4], DType dtype, const void* src, void* dst) {
  run(dims, dtype, src, dst, false);
}

}  // namespace tcv::kernels::cpu
