// CIFAR-10/100 binaries. The first input byte picks CIFAR-10, CIFAR-100 fine
// or CIFAR-100 coarse labels; the rest is the file.
#include <cstdint>
#include <string>

#include "data/cifar.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  using tcv::data::CifarKind;
  using tcv::data::CifarLabel;
  const int pick = data[0] % 3;
  const CifarKind kind = pick == 0 ? CifarKind::cifar10 : CifarKind::cifar100;
  const CifarLabel label = pick == 2 ? CifarLabel::coarse : CifarLabel::fine;
  const std::string path =
      tcv::fuzz::write_input({reinterpret_cast<const char*>(data) + 1, size - 1}, ".bin");
  try {
    const auto ds = tcv::data::read_cifar({path}, kind, label);
    TCV_FUZZ_EXPECT(ds.size() > 0);
  } catch (const tcv::Error&) {
  }
  return 0;
}
