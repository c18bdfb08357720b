// The trainer state beside a checkpoint (<stem>.json), read on resume.
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      tcv::fuzz::write_input({reinterpret_cast<const char*>(data), size}, "-state.json");
  const std::string stem = path.substr(0, path.size() - 5);
  tcv::train::TrainerState s;
  try {
    s = tcv::train::load_trainer_state(stem);
  } catch (const tcv::Error&) {
    return 0;
  }
  TCV_FUZZ_EXPECT(s.epoch >= 0 && s.epoch_iter >= 0 && s.iter >= 0);
  return 0;
}
