#include "engine/device.h"

#include "engine/error.h"
#include "kernels/cuda/runtime.h"

namespace tcv {

Device Device::parse(const std::string& s) {
  if (s == "cpu") return Device(DeviceType::CPU);
  if (s == "cuda") return Device(DeviceType::CUDA, 0);
  if (s.rfind("cuda:", 0) == 0) {
    try {
      size_t used = 0;
      const int idx = std::stoi(s.substr(5), &used);
      if (used == s.size() - 5 && idx >= 0) return Device(DeviceType::CUDA, idx);
    } catch (const std::exception&) {
    }
  }
  TCV_THROW("[device] unknown device '", s, "' (valid: cpu, cuda, cuda:N)");
}

bool cuda_is_available() {
  return kernels::cuda::device_count() > 0;
}
int cuda_device_count() {
  return kernels::cuda::device_count();
}

bool cuda_ops_supported() {
#if defined(TCV_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

}  // namespace tcv
