// load_safetensors on any file, then what tcv does with a loaded file: weights
// into a model (network.pretrained), optimizer state into SGD and Adam (a
// checkpoint's "optim.*" tensors), and the file as a checkpoint to resume from
// (its header's trainer state, then model and optimizer). Every rejection is a
// tcv::Error.
#include <cstdint>
#include <string>

#include "engine/serialize.h"
#include "fuzz_support.h"
#include "train/checkpoint.h"
#include "train/optim.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      tcv::fuzz::write_input({reinterpret_cast<const char*>(data), size}, ".safetensors");
  tcv::SafetensorsFile f;
  try {
    f = tcv::load_safetensors(path);
  } catch (const tcv::Error&) {
    return 0;
  }
  uint64_t bytes = 0;
  for (const auto& [name, t] : f.tensors) {
    TCV_FUZZ_EXPECT(t.defined() && t.is_contiguous());
    bytes += static_cast<uint64_t>(t.nbytes());
  }
  TCV_FUZZ_EXPECT(bytes <= size);  // every tensor's bytes come from the file

  auto model = tcv::fuzz::tiny_model();
  try {
    tcv::train::load_pretrained(path, *model);
  } catch (const tcv::Error&) {
  }
  // Optimizer state as load_checkpoint passes it: "optim.<key>" without the prefix.
  tcv::nn::StateDict optim_state;
  for (const auto& [name, t] : f.tensors)
    optim_state.emplace_back(name.rfind("optim.", 0) == 0 ? name.substr(6) : name, t);
  try {
    tcv::train::SGD sgd(model->named_parameters(), {.lr = 0.1, .momentum = 0.9});
    sgd.load_state_dict(optim_state);
  } catch (const tcv::Error&) {
  }
  try {
    tcv::train::Adam adam(model->named_parameters(), {});
    adam.load_state_dict(optim_state);
  } catch (const tcv::Error&) {
  }
  // As network.resume reads it: the trainer state from the header, then all of it.
  const std::string stem = path.substr(0, path.size() - std::string(".safetensors").size());
  try {
    tcv::train::load_trainer_state(stem);
  } catch (const tcv::Error&) {
  }
  try {
    auto fresh = tcv::fuzz::tiny_model();
    tcv::train::SGD sgd(fresh->named_parameters(), {.lr = 0.1, .momentum = 0.9});
    tcv::train::load_checkpoint(stem, *fresh, &sgd);
  } catch (const tcv::Error&) {
  }
  return 0;
}
