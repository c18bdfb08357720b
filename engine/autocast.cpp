#include "engine/autocast.h"

#include "kernels/cpu/conv.h"

namespace tcv::autocast {

namespace {
thread_local bool t_enabled = false;
thread_local DType t_dtype = DType::bf16;
}  // namespace

bool enabled() {
  return t_enabled;
}
DType dtype() {
  return t_dtype;
}

Guard::Guard(bool enable, DType dtype) : prev_enabled_(t_enabled), prev_dtype_(t_dtype) {
  TCV_CHECK(!enable || dtype == DType::bf16 || dtype == DType::f16,
            "[autocast] dtype must be bf16 or f16, got ", dtype_name(dtype));
  t_enabled = enable;
  if (enable) t_dtype = dtype;
}

Guard::~Guard() {
  t_enabled = prev_enabled_;
  t_dtype = prev_dtype_;
}

Tensor to_low(const Tensor& t) {
  if (!t_enabled || !t.defined() || !is_floating(t.dtype()) || t.dtype() == t_dtype) return t;
  return t.to(t_dtype);
}

Tensor to_f32(const Tensor& t) {
  if (!t_enabled || !t.defined()) return t;
  if (t.dtype() == DType::f16 || t.dtype() == DType::bf16) return t.to(DType::f32);
  return t;
}

bool needs_low(std::initializer_list<const Tensor*> ts) {
  if (!t_enabled) return false;
  for (const Tensor* t : ts)
    if (t->defined() && is_floating(t->dtype()) && t->dtype() != t_dtype) return true;
  return false;
}

bool needs_f32(const Tensor& t) {
  return t_enabled && t.defined() && (t.dtype() == DType::f16 || t.dtype() == DType::bf16);
}

bool supported(Device device, DType dtype) {
  return unsupported_reason(device, dtype).empty();
}

std::string unsupported_reason(Device device, DType dtype) {
  if (dtype != DType::bf16 && dtype != DType::f16)
    return std::string("mixed precision is bf16 or f16, not ") + dtype_name(dtype);
  if (device.is_cuda()) return "";
  if (dtype == DType::f16)
    return "f16 mixed precision runs on CUDA only (the " + device.str() +
           " has no f16 kernels); use bf16 on a CPU with bf16 instructions, or \"off\"";
  if (!kernels::cpu::bf16_supported())
    return "bf16 mixed precision on the " + device.str() +
           " needs AVX512_BF16 or AMX-BF16 instructions, which this CPU does not offer (or "
           "ONEDNN_MAX_CPU_ISA hides); use \"off\"";
  return "";
}

bool parse_mode(const std::string& mode, DType& dtype) {
  if (mode == "off") return false;
  if (mode == "bf16") {
    dtype = DType::bf16;
    return true;
  }
  if (mode == "f16") {
    dtype = DType::f16;
    return true;
  }
  TCV_THROW("[autocast] unknown mode '", mode, "' (valid: off, bf16, f16)");
}

}  // namespace tcv::autocast
