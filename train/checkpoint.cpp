#include "train/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/json.h"
#include "engine/serialize.h"

namespace tcv::train {

namespace fs = std::filesystem;

void save_checkpoint(const std::string& stem, const nn::Module& model, const Optimizer* optim,
                     const TrainerState& s) {
  NamedTensors tensors;
  for (auto& [name, t] : model.state_dict()) tensors.emplace_back("model." + name, t);
  if (optim)
    for (auto& [name, t] : optim->state_dict()) tensors.emplace_back("optim." + name, t);
  save_safetensors(stem + ".safetensors", tensors, {{"format", "tcv"}, {"model", s.model_name}});

  Json j = Json::object();
  j["weights"] = fs::path(stem).filename().string() + ".safetensors";
  j["model_name"] = s.model_name;
  j["epoch"] = s.epoch;
  j["epoch_iter"] = s.epoch_iter;
  j["iter"] = s.iter;
  j["lr"] = s.lr;
  // u64 as strings: JSON integers are i64 here, and offsets may not fit.
  j["rng_seed"] = std::to_string(s.rng_seed);
  j["rng_offset"] = std::to_string(s.rng_offset);
  j["best_top1"] = s.best_top1;
  j["last_top1"] = s.last_top1;
  j["elapsed_s"] = s.elapsed_s;
  write_file_atomic(stem + ".json", json_dump(j, 2) + "\n");
}

std::string resolve_checkpoint(const std::string& path) {
  const fs::path p(path);
  if (fs::is_directory(p)) {
    if (fs::exists(p / "latest.json")) return (p / "latest").string();
    if (fs::exists(p / "checkpoints" / "latest.json"))
      return (p / "checkpoints" / "latest").string();
    TCV_THROW(path, ": directory holds no latest.json (nor checkpoints/latest.json)");
  }
  const std::string ext = p.extension().string();
  const std::string stem =
      (ext == ".json" || ext == ".safetensors") ? (p.parent_path() / p.stem()).string() : path;
  TCV_CHECK(fs::exists(stem + ".json"), path, ": no checkpoint here (", stem,
            ".json does not exist)");
  TCV_CHECK(fs::exists(stem + ".safetensors"), path, ": checkpoint weights ", stem,
            ".safetensors do not exist");
  return stem;
}

TrainerState load_trainer_state(const std::string& stem) {
  const std::string file = stem + ".json";
  std::ifstream f(file);
  TCV_CHECK(f.good(), file, ": cannot open trainer state");
  std::stringstream ss;
  ss << f.rdbuf();
  TrainerState s;
  try {
    const Json j = json_parse(ss.str());
    s.model_name = json_string(j, "model_name");
    s.epoch = json_int(j, "epoch");
    s.epoch_iter = json_int(j, "epoch_iter");
    s.iter = json_int(j, "iter");
    s.lr = json_double(j, "lr");
    s.rng_seed = std::stoull(json_string(j, "rng_seed"));
    s.rng_offset = std::stoull(json_string(j, "rng_offset"));
    s.best_top1 = json_double(j, "best_top1");
    s.last_top1 = json_double(j, "last_top1");
    s.elapsed_s = json_double(j, "elapsed_s");
  } catch (const std::exception& e) {
    TCV_THROW(file, ": bad trainer state: ", e.what());
  }
  TCV_CHECK(s.epoch >= 0 && s.epoch_iter >= 0 && s.iter >= 0, file,
            ": negative epoch/epoch_iter/iter");
  return s;
}

TrainerState load_checkpoint(const std::string& stem, nn::Module& model, Optimizer* optim) {
  TrainerState s = load_trainer_state(stem);
  const std::string file = stem + ".safetensors";
  SafetensorsFile st = load_safetensors(file);
  nn::StateDict model_state, optim_state;
  for (auto& [name, t] : st.tensors) {
    if (name.rfind("model.", 0) == 0)
      model_state.emplace_back(name.substr(6), t);
    else if (name.rfind("optim.", 0) == 0)
      optim_state.emplace_back(name.substr(6), t);
    else
      TCV_THROW(file, ": unexpected tensor '", name, "' (expected model.* or optim.*)");
  }
  try {
    model.load_state_dict(model_state, nn::Strict::yes);
    if (optim) optim->load_state_dict(optim_state);
  } catch (const Error& e) {
    TCV_THROW(file, ": ", e.what());
  }
  return s;
}

PretrainedLoad load_pretrained(const std::string& path, nn::Module& model) {
  const SafetensorsFile file = load_safetensors(path);
  // A tcv checkpoint prefixes model tensors with "model." and holds optimizer state.
  bool tcv_checkpoint = false;
  for (const auto& [k, t] : file.tensors)
    if (k.rfind("model.", 0) == 0) tcv_checkpoint = true;
  std::map<std::string, Tensor> given;
  for (const auto& [k, t] : file.tensors) {
    if (!tcv_checkpoint)
      given[k] = t;
    else if (k.rfind("model.", 0) == 0)
      given[k.substr(6)] = t;
  }

  // The head: the parameters of the last module that owns any directly.
  std::set<std::string> head;
  for (auto& [prefix, m] : model.named_modules()) {
    const nn::StateDict own = m->named_parameters(/*recurse=*/false);
    if (own.empty()) continue;
    head.clear();
    for (const auto& [n, t] : own) head.insert(prefix.empty() ? n : prefix + "." + n);
  }

  PretrainedLoad result;
  nn::StateDict to_load;
  std::vector<std::string> missing, mismatched;
  std::set<std::string> model_keys;
  for (const auto& [k, t] : model.state_dict()) {
    model_keys.insert(k);
    auto it = given.find(k);
    if (it == given.end()) {
      missing.push_back(k);
    } else if (it->second.shape() != t.shape()) {
      if (head.count(k))
        result.kept.push_back(k);
      else
        mismatched.push_back(k + " " + it->second.shape_str() + " vs model " + t.shape_str());
    } else {
      to_load.emplace_back(k, it->second);
    }
  }
  std::vector<std::string> unexpected;
  for (const auto& [k, t] : given)
    if (!model_keys.count(k)) unexpected.push_back(k);
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (size_t i = 0; i < v.size() && i < 10; ++i) out += (i ? ", " : "") + v[i];
    if (v.size() > 10) out += ", ... (" + std::to_string(v.size()) + " in all)";
    return out;
  };
  TCV_CHECK(missing.empty() && mismatched.empty() && unexpected.empty(), "[pretrained] ", path,
            " does not fit the model:", missing.empty() ? "" : " missing " + join(missing) + ";",
            mismatched.empty() ? "" : " shape mismatch " + join(mismatched) + ";",
            unexpected.empty() ? "" : " unexpected " + join(unexpected) + ";",
            " (only the classifier head may differ in shape)");
  model.load_state_dict(to_load, nn::Strict::no);
  result.loaded = static_cast<int64_t>(to_load.size());
  return result;
}

}  // namespace tcv::train
