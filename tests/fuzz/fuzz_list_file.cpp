// List files ("relative/path label" per line): the dataset is built from them
// with the class count taken from the labels and with a fixed one.
#include <cstdint>
#include <string>

#include "data/folder.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      tcv::fuzz::write_input({reinterpret_cast<const char*>(data), size}, ".txt");
  for (const int64_t classes : {int64_t{0}, int64_t{10}}) {
    try {
      tcv::data::ListFileDataset ds(path, "/nonexistent-root", classes);
      TCV_FUZZ_EXPECT(ds.size() > 0 && ds.num_classes() > 0);
      for (const auto& [file, label] : ds.samples())
        TCV_FUZZ_EXPECT(!file.empty() && label >= 0 && label < ds.num_classes());
    } catch (const tcv::Error&) {
    }
  }
  return 0;
}
