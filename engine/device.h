// Where a tensor's bytes live.
#pragma once

#include <cstdint>
#include <string>

namespace tcv {

enum class DeviceType : uint8_t { CPU, CUDA };

/// A device: "cpu" or "cuda:N".
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}
  /// Parses "cpu", "cuda", "cuda:1".
  static Device parse(const std::string& s);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

inline constexpr Device kCPU{};

/// True when this build has CUDA and a device is present.
bool cuda_is_available();
/// Number of visible CUDA devices (0 without CUDA).
int cuda_device_count();
/// Whether this build has the CUDA kernels (built with nvcc). "auto" device
/// choices pick the GPU only when this and cuda_is_available() hold.
bool cuda_ops_supported();

}  // namespace tcv
