// IDX files (MNIST, Fashion-MNIST), raw or gzip-compressed.
#include <cstdint>
#include <string>

#include "data/idx.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      tcv::fuzz::write_input({reinterpret_cast<const char*>(data), size}, ".idx");
  tcv::Tensor t;
  try {
    t = tcv::data::read_idx(path);
  } catch (const tcv::Error&) {
    return 0;
  }
  TCV_FUZZ_EXPECT(t.defined() && t.dim() >= 1);
  return 0;
}
