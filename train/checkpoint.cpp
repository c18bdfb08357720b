#include "train/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/json.h"
#include "engine/serialize.h"
#include "train/config.h"

namespace tcv::train {

namespace fs = std::filesystem;

namespace {

// The "__metadata__" keys of a tcv checkpoint.
constexpr const char* kFormatKey = "format";
constexpr const char* kModelKey = "model";
constexpr const char* kStateKey = "trainer_state";

std::string errno_str() {
  return std::strerror(errno);
}

std::string read_text(const std::string& file, const char* what) {
  std::ifstream f(file);
  TCV_CHECK(f.good(), file, ": cannot open ", what);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The "__metadata__" of a safetensors file, reading only its header.
std::map<std::string, std::string> read_metadata(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  TCV_CHECK(fd >= 0, file, ": cannot open checkpoint: ", errno_str());
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  auto read_exact = [&](char* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::read(fd, dst + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  };
  struct stat st {};
  TCV_CHECK(::fstat(fd, &st) == 0, file, ": cannot stat checkpoint: ", errno_str());
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  unsigned char len[8];
  TCV_CHECK(size >= 8 && read_exact(reinterpret_cast<char*>(len), 8), file,
            ": truncated checkpoint (", size, " bytes; a safetensors file starts with an 8-byte ",
            "header length)");
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(len[i]) << (8 * i);
  TCV_CHECK(hl <= size - 8 && hl <= (100ull << 20), file, ": header length ", hl,
            " does not fit the file (", size, " bytes): truncated or not a safetensors file");
  std::string header(hl, '\0');
  TCV_CHECK(read_exact(header.data(), hl), file, ": cannot read the header: ", errno_str());
  Json h;
  try {
    h = json_parse(header);
  } catch (const Error& e) {
    TCV_THROW(file, ": bad safetensors header: ", e.what());
  }
  std::map<std::string, std::string> out;
  if (!h.is_object() || !h.contains("__metadata__")) return out;
  const Json& meta = h.at("__metadata__");
  TCV_CHECK(meta.is_object(), file, ": \"__metadata__\" must be an object of strings");
  for (const auto& [k, v] : meta.get_ref<const Json::object_t&>()) {
    TCV_CHECK(v.is_string(), file, ": \"__metadata__\" value of \"", k, "\" is not a string");
    out[k] = v.get<std::string>();
  }
  return out;
}

// The trainer state of a checkpoint with metadata `meta`: in the metadata, or
// for a checkpoint of an earlier tcv, in "<stem>.json".
TrainerState trainer_state_of(const std::string& stem,
                              const std::map<std::string, std::string>& meta) {
  const std::string file = stem + ".safetensors";
  if (auto it = meta.find(kStateKey); it != meta.end())
    return parse_trainer_state(
        it->second, file + ": trainer state (__metadata__ \"" + std::string(kStateKey) + "\")");
  const std::string legacy = stem + ".json";
  TCV_CHECK(fs::exists(legacy), file, ": holds no trainer state (no __metadata__ \"", kStateKey,
            "\", and no ", legacy, " as earlier versions wrote): not a tcv checkpoint; weights ",
            "to fine-tune from go in network.pretrained");
  return parse_trainer_state(read_text(legacy, "trainer state"), legacy);
}

Json trainer_state_json(const TrainerState& s) {
  Json j = Json::object();
  j["model_name"] = s.model_name;
  j["epoch"] = s.epoch;
  j["epoch_iter"] = s.epoch_iter;
  j["iter"] = s.iter;
  j["lr"] = s.lr;
  // u64 as strings: JSON integers are i64 here, and offsets may not fit.
  j["rng_seed"] = std::to_string(s.rng_seed);
  j["rng_offset"] = std::to_string(s.rng_offset);
  j["task"] = s.task;
  j["best_metric"] = s.best_metric;
  j["best_" + s.best_metric] = s.best_score;
  j["last_" + s.best_metric] = s.last_score;
  j["elapsed_s"] = s.elapsed_s;
  j["nonfinite_skipped"] = s.nonfinite_skipped;
  return j;
}

// Splits a checkpoint's tensors into model and optimizer state.
void split_state(const std::string& file, const NamedTensors& tensors, nn::StateDict& model,
                 nn::StateDict& optim) {
  for (const auto& [name, t] : tensors) {
    if (name.rfind("model.", 0) == 0)
      model.emplace_back(name.substr(6), t);
    else if (name.rfind("optim.", 0) == 0)
      optim.emplace_back(name.substr(6), t);
    else
      TCV_THROW(file, ": unexpected tensor '", name, "' (expected model.* or optim.*)");
  }
}

}  // namespace

TrainerState parse_trainer_state(std::string_view text, const std::string& where) {
  Json j;
  try {
    j = json_parse(text);
  } catch (const Error& e) {
    TCV_THROW(where, ": bad trainer state: not valid JSON: ", e.what());
  }
  TCV_CHECK(j.is_object(), where, ": bad trainer state: a JSON ", j.type_name(),
            ", expected an object");
  auto field = [&](const char* key) -> const Json& {
    TCV_CHECK(j.contains(key), where, ": bad trainer state: no \"", key, "\"");
    return j.at(key);
  };
  auto bad = [&](const char* key, const std::string& expected, const Json& v) {
    TCV_THROW(where, ": bad trainer state: \"", key, "\" must be ", expected, ", got ",
              json_dump(v));
  };
  auto integer = [&](const char* key, int64_t hi) {
    const Json& v = field(key);
    // An integer above int64's range reads back negative here, and is refused.
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > hi)
      bad(key, "an integer in [0, " + std::to_string(hi) + "]", v);
    return v.get<int64_t>();
  };
  auto number = [&](const char* key, double lo, double hi) {
    const Json& v = field(key);
    if (!v.is_number() || !(v.get<double>() >= lo && v.get<double>() <= hi))
      bad(key, "a number in [" + json_dump(Json(lo)) + ", " + json_dump(Json(hi)) + "]", v);
    return v.get<double>();
  };
  // Metrics are percentages (top-1) or fractions (mAP, mIoU).
  auto score = [&](const std::string& key) {
    const Json& v = field(key.c_str());
    if (!v.is_number() ||
        !(v.get<double>() == -1.0 || (v.get<double>() >= 0.0 && v.get<double>() <= 100.0)))
      bad(key.c_str(), "a percentage in [0, 100] or -1 (none yet)", v);
    return v.get<double>();
  };
  auto name_of = [&](const char* key, const std::string& absent) {
    const auto it = j.find(key);
    if (it == j.end()) return absent;  // earlier versions: classification
    const Json& v = *it;
    if (!v.is_string() || v.get_ref<const std::string&>().empty() ||
        v.get_ref<const std::string&>().find_first_not_of(
            "abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
      bad(key, "a name (lower-case letters, digits, _)", v);
    return v.get<std::string>();
  };
  auto u64 = [&](const char* key) {
    const Json& v = field(key);
    uint64_t out = 0;
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
      if (!s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size()) return out;
    }
    bad(key, "an unsigned 64-bit integer written as a string of digits", v);
    return out;
  };

  TrainerState s;
  const Json& name = field("model_name");
  if (!name.is_string() || name.get_ref<const std::string&>().empty())
    bad("model_name", "a model name (a non-empty string)", name);
  s.model_name = name.get<std::string>();
  s.iter = integer("iter", kMaxIterations);
  s.epoch = integer("epoch", s.iter);  // every epoch has at least one iteration
  s.epoch_iter = integer("epoch_iter", s.iter);
  s.lr = number("lr", 0.0, 1e300);
  s.rng_seed = u64("rng_seed");
  s.rng_offset = u64("rng_offset");
  s.task = name_of("task", "cls");
  s.best_metric = name_of("best_metric", "top1");
  s.best_score = score("best_" + s.best_metric);
  s.last_score = score("last_" + s.best_metric);
  s.elapsed_s = number("elapsed_s", 0.0, 1e300);
  // Absent from checkpoints of earlier versions.
  s.nonfinite_skipped = j.contains("nonfinite_skipped") ? integer("nonfinite_skipped", s.iter) : 0;
  return s;
}

void save_checkpoint(const std::string& stem, const nn::Module& model, const Optimizer* optim,
                     const TrainerState& s) {
  const nn::StateDict model_state = model.state_dict();
  const nn::StateDict optim_state = optim ? optim->state_dict() : nn::StateDict{};
  std::vector<Tensor> all;
  for (const auto* d : {&model_state, &optim_state})
    for (const auto& [name, t] : *d) all.push_back(t);
  if (!all_finite(all)) {
    const std::string m = first_nonfinite(model_state);
    const std::string bad = m.empty() ? "optim." + first_nonfinite(optim_state) : "model." + m;
    TCV_THROW(stem, ".safetensors: not saved: tensor \"", bad, "\" holds inf or NaN (after ",
              "iteration ", s.iter, "); the checkpoint already there, if any, is kept");
  }
  NamedTensors tensors;
  for (const auto& [name, t] : model_state) tensors.emplace_back("model." + name, t);
  for (const auto& [name, t] : optim_state) tensors.emplace_back("optim." + name, t);
  save_safetensors(stem + ".safetensors", tensors,
                   {{kFormatKey, "tcv"},
                    {kModelKey, s.model_name},
                    {kStateKey, json_dump(trainer_state_json(s))}});
  // A trainer state beside the weights (earlier versions) would now be stale.
  std::error_code ec;
  fs::remove(stem + ".json", ec);
}

std::string resolve_checkpoint(const std::string& path) {
  const fs::path p(path);
  if (fs::is_directory(p)) {
    for (const fs::path& d : {p, p / "checkpoints"})
      if (fs::exists(d / "latest.safetensors")) return (d / "latest").string();
    TCV_THROW(path,
              ": directory holds no checkpoint (no latest.safetensors, nor "
              "checkpoints/latest.safetensors)");
  }
  const std::string ext = p.extension().string();
  const std::string stem =
      (ext == ".json" || ext == ".safetensors") ? (p.parent_path() / p.stem()).string() : path;
  TCV_CHECK(fs::exists(stem + ".safetensors"), path, ": no checkpoint here (", stem,
            ".safetensors does not exist)");
  return stem;
}

std::string find_latest_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  struct Candidate {
    int64_t iter;
    bool latest;
    std::string stem;
  };
  std::vector<Candidate> found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".safetensors") continue;  // temp files end in ".<n>"
    const std::string stem = (e.path().parent_path() / e.path().stem()).string();
    try {
      found.push_back({load_trainer_state(stem).iter, e.path().stem() == "latest", stem});
    } catch (const std::exception&) {  // unreadable trainer state: not a candidate
    }
  }
  std::sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) {
    return a.iter != b.iter ? a.iter > b.iter : a.latest > b.latest;
  });
  for (const auto& c : found) {
    try {
      load_safetensors(c.stem + ".safetensors");
      return c.stem;
    } catch (const std::exception&) {  // truncated or corrupt weights: try the next newest
    }
  }
  return "";
}

TrainerState load_trainer_state(const std::string& stem) {
  return trainer_state_of(stem, read_metadata(stem + ".safetensors"));
}

TrainerState load_checkpoint(const std::string& stem, nn::Module& model, Optimizer* optim) {
  const std::string file = stem + ".safetensors";
  const SafetensorsFile st = load_safetensors(file);
  TrainerState s = trainer_state_of(stem, st.metadata);
  nn::StateDict model_state, optim_state;
  split_state(file, st.tensors, model_state, optim_state);
  for (const auto& [prefix, d] : {std::pair{"model.", &model_state}, {"optim.", &optim_state}}) {
    const std::string bad = first_nonfinite(*d);
    TCV_CHECK(bad.empty(), file, ": tensor \"", prefix, bad, "\" holds inf or NaN");
  }
  try {
    model.load_state_dict(model_state, nn::Strict::yes);
  } catch (const Error& e) {
    TCV_THROW(file, ": the weights do not fit the model \"", s.model_name, "\": ", e.what());
  }
  if (optim) {
    try {
      optim->load_state_dict(optim_state);
    } catch (const Error& e) {
      TCV_THROW(file, ": the optimizer state does not fit solver.optim: ", e.what());
    }
  }
  return s;
}

int64_t remove_stale_temp_files(const std::string& dir) {
  int64_t removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    // "<name>.tmp.<pid>.<n>", as write_file_atomic names them.
    const std::string f = e.path().filename().string();
    const size_t t = f.rfind(".tmp.");
    if (t == std::string::npos) continue;
    const std::string rest = f.substr(t + 5);
    const size_t dot = rest.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == rest.size() ||
        rest.find_first_not_of("0123456789.") != std::string::npos ||
        rest.find('.', dot + 1) != std::string::npos)
      continue;
    long long pid = 0;
    std::from_chars(rest.data(), rest.data() + dot, pid);
    const bool alive =
        pid > 0 && pid != ::getpid() && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
    if (alive) continue;
    std::error_code rm;
    if (fs::remove(e.path(), rm)) ++removed;
  }
  return removed;
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
  for (const auto& [k, t] : given)
    TCV_CHECK(all_finite({t}), "[pretrained] ", path, ": tensor \"",
              tcv_checkpoint ? "model." + k : k, "\" holds inf or NaN");

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
