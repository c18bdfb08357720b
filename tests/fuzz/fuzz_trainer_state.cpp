// The trainer state a checkpoint holds (JSON text in its safetensors
// metadata, or <stem>.json from earlier versions), read on resume.
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tcv::train::TrainerState s;
  try {
    s = tcv::train::parse_trainer_state(text, "fuzz-state");
  } catch (const tcv::Error&) {
    return 0;
  }
  TCV_FUZZ_EXPECT(s.iter >= 0 && s.epoch >= 0 && s.epoch <= s.iter && s.epoch_iter >= 0 &&
                  s.epoch_iter <= s.iter && !s.model_name.empty());
  return 0;
}
