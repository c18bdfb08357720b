// Mixed precision, autocast-style: inside an autocast::Guard the ops that
// gain from 16-bit math (conv2d, linear, matmul) cast their floating inputs
// to the guard's dtype (on CUDA f16 or bf16, on the CPU bf16: supported()), the ones that need
// range or precision (softmax, log_softmax, the losses, batch norm statistics) compute in f32, and
// the rest run in whatever dtype their inputs have. Casts are ordinary ops, so gradients flow back
// to f32 master weights in f32. Backward runs with autocast off.
#pragma once

#include "engine/tensor.h"

namespace tcv::autocast {

/// Whether autocast is on for this thread, and its 16-bit dtype.
bool enabled();
DType dtype();

/// Turns autocast on (bf16 or f16) or off for a scope; nestable.
class Guard {
 public:
  explicit Guard(bool enable, DType dtype = DType::bf16);
  ~Guard();
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  bool prev_enabled_;
  DType prev_dtype_;
};

/// For ops that run in low precision: a floating `t` in the autocast dtype
/// when autocast is on; otherwise (or undefined, or integer) t itself.
Tensor to_low(const Tensor& t);
/// For ops that run in f32: a 16-bit floating `t` as f32 when autocast is on.
Tensor to_f32(const Tensor& t);

/// True when autocast is on and some defined floating tensor among `ts` is
/// not in the autocast dtype: a low-precision op then re-calls itself with
/// to_low() of its operands.
bool needs_low(std::initializer_list<const Tensor*> ts);
/// True when autocast is on and t is f16 or bf16: an f32 op then re-calls
/// itself with to_f32(t).
bool needs_f32(const Tensor& t);

/// Whether `device` runs mixed precision in `dtype`: CUDA f16 and bf16; the
/// CPU bf16 where it has bf16 instructions (AVX512_BF16 or AMX-BF16, as oneDNN
/// dispatches: kernels::cpu::bf16_supported), never f16.
bool supported(Device device, DType dtype);
/// Why `device` cannot run mixed precision in `dtype`, as a sentence naming the
/// device and what it lacks; empty when supported().
std::string unsupported_reason(Device device, DType dtype);

/// Parses "off" | "bf16" | "f16" (config values); throws naming the value.
/// Returns false for "off", else true with `dtype` set.
bool parse_mode(const std::string& mode, DType& dtype);

}  // namespace tcv::autocast
