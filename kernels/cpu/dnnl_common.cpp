#include "kernels/cpu/dnnl_common.h"

#include <cstdlib>

namespace tcv::kernels::cpu::dnnl_util {

dnnl::engine& engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

namespace {
struct Buffers {
  struct Slot {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  Slot slots[static_cast<int>(Buf::count)];
  ~Buffers() {
    for (auto& s : slots) std::free(s.ptr);
  }
};
}  // namespace

void* buffer(Buf slot, size_t bytes) {
  thread_local Buffers bufs;
  auto& s = bufs.slots[static_cast<int>(slot)];
  if (s.bytes < bytes) {
    std::free(s.ptr);
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    s.ptr = std::aligned_alloc(64, rounded);
    TCV_CHECK(s.ptr != nullptr, "[dnnl] out of memory allocating ", rounded, " bytes");
    s.bytes = rounded;
  }
  return s.ptr;
}

dnnl::primitive_attr default_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

Layout::Layout(const dnnl::memory::desc& plain_md, const dnnl::memory::desc& want_md, bool in,
               bool out)
    : plain(plain_md), want(want_md) {
  if (same()) return;
  if (in)
    to_want = std::make_unique<dnnl::reorder>(
        dnnl::reorder::primitive_desc(engine(), plain, engine(), want));
  if (out)
    to_plain = std::make_unique<dnnl::reorder>(
        dnnl::reorder::primitive_desc(engine(), want, engine(), plain));
}

dnnl::memory Layout::in(void* data, Buf slot) const {
  if (same()) return wrap(plain, data);
  dnnl::memory src = wrap(plain, data);
  dnnl::memory dst = wrap(want, buffer(slot, want.get_size()));
  to_want->execute(stream(), src, dst);
  return dst;
}

dnnl::memory Layout::out(void* data, Buf slot) const {
  if (same()) return wrap(plain, data);
  return wrap(want, buffer(slot, want.get_size()));
}

void Layout::finish(dnnl::memory m, void* data) const {
  if (same()) return;
  dnnl::memory dst = wrap(plain, data);
  to_plain->execute(stream(), m, dst);
}

dnnl::memory Layout::in(const KTensor& t, Buf slot) const {
  return t.blocked ? wrap(want, t.data) : in(t.data, slot);
}

dnnl::memory Layout::out(const KTensor& t, Buf slot) const {
  return t.blocked ? wrap(want, t.data) : out(t.data, slot);
}

void Layout::finish(dnnl::memory m, const KTensor& t) const {
  if (!t.blocked) finish(m, t.data);
}

dnnl::memory scratchpad(const dnnl::primitive_desc_base& pd) {
  const dnnl::memory::desc md = pd.scratchpad_desc();
  const size_t bytes = md.get_size();
  return wrap(md, bytes ? buffer(Buf::scratchpad, bytes) : nullptr);
}

bool bf16_in_hardware() {
  static const bool ok = [] {
    // The ISA values are bit sets, each including the ones below it: any ISA
    // that contains AVX512_BF16 (AMX-BF16 CPUs and newer ones too).
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return (isa & bf16) == bf16;
  }();
  return ok;
}

void rethrow(const char* op, const dnnl::error& e) {
  TCV_THROW("[", op, "] oneDNN error: ", e.what(), " (status ", static_cast<int>(e.status), ")");
}

}  // namespace tcv::kernels::cpu::dnnl_util
