// Process-wide switches of the CUDA backend, settable from any build.
#pragma once

namespace tcv::kernels::cuda {

/// TF32 tensor cores for f32 GEMM and convolution (like PyTorch's
/// allow_tf32 flags); off by default, so f32 means f32.
void set_allow_tf32(bool allow);
bool get_allow_tf32();
/// cuDNN algorithm search per shape (like torch.backends.cudnn.benchmark); on by default.
void set_cudnn_benchmark(bool on);
bool get_cudnn_benchmark();
/// For tests: kernels that index in 32 bits below 2^31 elements (the
/// elementwise loops, batch norm) take their 64-bit variants at any size, so
/// those paths run without tensors of 2^31 elements. Off unless the
/// environment says TCV_CUDA_WIDE_INDICES=1 (any other value but 0 is an error).
void set_force_wide_indices(bool on);
bool get_force_wide_indices();

}  // namespace tcv::kernels::cuda
