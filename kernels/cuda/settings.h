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

}  // namespace tcv::kernels::cuda
