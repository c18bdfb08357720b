#include "layers/module.h"

#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "engine/autograd.h"

namespace tcv::nn {

std::string Size2::str() const {
  return h == w ? std::to_string(h) : tuple_str();
}

std::string Size2::tuple_str() const {
  // Built with appends: GCC 12 warns falsely (-Wrestrict) on "(" + std::string.
  std::string s = "(";
  s += std::to_string(h);
  s += ", ";
  s += std::to_string(w);
  s += ")";
  return s;
}

namespace {

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

void check_name(const char* what, const std::string& name) {
  TCV_CHECK(!name.empty() && name.find('.') == std::string::npos, "[Module] ", what, " name \"",
            name, "\" must be non-empty and contain no '.'");
}

std::string list_keys(const std::vector<std::string>& keys) {
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "\"" : ", \"") + k + "\"";
  return s;
}

}  // namespace

// ---------------------------------------------------------------- registration

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  check_name("parameter", name);
  for (const auto& [n, unused] : params_)
    TCV_CHECK(n != name, "[Module] ", type_name(), " already has a parameter \"", name, "\"");
  if (t.defined() && !t.requires_grad()) t.set_requires_grad(true);
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  check_name("buffer", name);
  for (const auto& [n, unused] : buffers_)
    TCV_CHECK(n != name, "[Module] ", type_name(), " already has a buffer \"", name, "\"");
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

void Module::register_child(const std::string& name, std::shared_ptr<Module> m) {
  check_name("child module", name);
  TCV_CHECK(m != nullptr, "[Module] child module \"", name, "\" is null");
  for (const auto& [n, unused] : children_)
    TCV_CHECK(n != name, "[Module] ", type_name(), " already has a child \"", name, "\"");
  children_.emplace_back(name, std::move(m));
}

// ---------------------------------------------------------------- traversal

StateDict Module::named_parameters(bool recurse) const {
  StateDict out;
  // Like PyTorch, a parameter shared between modules is listed once (first name).
  std::set<const TensorImpl*> seen;
  std::function<void(const Module&, const std::string&)> walk = [&](const Module& m,
                                                                    const std::string& prefix) {
    for (const auto& [n, t] : m.params_)
      if (t.defined() && seen.insert(t.impl_ptr().get()).second)
        out.emplace_back(join(prefix, n), t);
    if (!recurse) return;
    for (const auto& [n, c] : m.children_) walk(*c, join(prefix, n));
  };
  walk(*this, "");
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

StateDict Module::named_buffers(bool recurse) const {
  StateDict out;
  std::function<void(const Module&, const std::string&)> walk = [&](const Module& m,
                                                                    const std::string& prefix) {
    for (const auto& [n, t] : m.buffers_)
      if (t.defined()) out.emplace_back(join(prefix, n), t);
    if (!recurse) return;
    for (const auto& [n, c] : m.children_) walk(*c, join(prefix, n));
  };
  walk(*this, "");
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  std::function<void(Module&, const std::string&)> walk = [&](Module& m,
                                                              const std::string& prefix) {
    out.emplace_back(prefix, &m);
    for (auto& [n, c] : m.children_) walk(*c, join(prefix, n));
  };
  walk(*this, "");
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

// ---------------------------------------------------------------- mode

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

// ---------------------------------------------------------------- state

StateDict Module::state_dict() const {
  StateDict out;
  std::function<void(const Module&, const std::string&)> walk = [&](const Module& m,
                                                                    const std::string& prefix) {
    for (const auto& [n, t] : m.params_)
      if (t.defined()) out.emplace_back(join(prefix, n), t.detach());
    for (const auto& [n, t] : m.buffers_)
      if (t.defined()) out.emplace_back(join(prefix, n), t.detach());
    for (const auto& [n, c] : m.children_) walk(*c, join(prefix, n));
  };
  walk(*this, "");
  return out;
}

void Module::load_state_dict(const StateDict& state, Strict strict) {
  // Every target is a live handle (not the detached alias state_dict() returns),
  // so the copy lands in the tensors the layers and optimizers hold.
  std::vector<std::pair<std::string, Tensor>> targets;
  std::function<void(const Module&, const std::string&)> walk = [&](const Module& m,
                                                                    const std::string& prefix) {
    for (const auto& [n, t] : m.params_)
      if (t.defined()) targets.emplace_back(join(prefix, n), t);
    for (const auto& [n, t] : m.buffers_)
      if (t.defined()) targets.emplace_back(join(prefix, n), t);
    for (const auto& [n, c] : m.children_) walk(*c, join(prefix, n));
  };
  walk(*this, "");

  std::map<std::string, const Tensor*> given;
  for (const auto& [k, t] : state) given[k] = &t;
  std::set<std::string> known;
  std::vector<std::string> missing, unexpected, mismatched;
  std::vector<std::pair<Tensor, const Tensor*>> copies;
  for (const auto& [k, dst] : targets) {
    known.insert(k);
    auto it = given.find(k);
    if (it == given.end()) {
      missing.push_back(k);
      continue;
    }
    const Tensor& src = *it->second;
    if (!src.defined() || src.shape() != dst.shape()) {
      mismatched.push_back("\"" + k + "\": checkpoint " +
                           (src.defined() ? src.shape_str() : std::string("undefined")) +
                           " vs model " + dst.shape_str());
      continue;
    }
    copies.emplace_back(dst, &src);
  }
  for (const auto& [k, t] : state)
    if (!known.count(k)) unexpected.push_back(k);

  // Validate everything first so a failed load leaves the model untouched.
  std::ostringstream err;
  if (!mismatched.empty()) {
    err << "size mismatch for ";
    for (size_t i = 0; i < mismatched.size(); ++i) err << (i ? "; " : "") << mismatched[i];
  }
  if (strict == Strict::yes) {
    if (!missing.empty())
      err << (err.tellp() > 0 ? "; " : "") << "missing keys: " << list_keys(missing);
    if (!unexpected.empty())
      err << (err.tellp() > 0 ? "; " : "") << "unexpected keys: " << list_keys(unexpected);
  }
  const std::string msg = err.str();
  TCV_CHECK(msg.empty(), "[load_state_dict] ", type_name(), ": ", msg);

  NoGradGuard no_grad;
  for (auto& [dst, src] : copies) dst.copy_(src->detach());
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for (auto& [name, m] : named_modules()) {
    for (auto* list : {&m->params_, &m->buffers_}) {
      for (auto& [n, t] : *list) {
        if (!t.defined()) continue;
        if (t.device() != device) t.set_data(t.detach().to(device));
        Tensor g = t.grad();
        if (g.defined() && g.device() != device) t.set_grad(g.to(device));
      }
    }
  }
}

void Module::to(DType dtype) {
  TCV_CHECK(is_floating(dtype), "[Module::to] can only convert to a floating dtype, got ",
            dtype_name(dtype));
  NoGradGuard no_grad;
  for (auto& [name, m] : named_modules()) {
    for (auto* list : {&m->params_, &m->buffers_}) {
      for (auto& [n, t] : *list) {
        // Integer buffers (num_batches_tracked) keep their type, as in PyTorch.
        if (!t.defined() || !is_floating(t.dtype()) || t.dtype() == dtype) continue;
        t.set_data(t.detach().to(dtype));
        Tensor g = t.grad();
        if (g.defined()) t.set_grad(g.to(dtype));
      }
    }
  }
}

void Module::zero_grad(bool set_to_none) {
  for (auto& [n, t] : named_parameters()) {
    Tensor g = t.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      Tensor h = t;
      h.set_grad(Tensor());
    } else {
      g.zero_();
    }
  }
}

std::string Module::str() const {
  const std::string extra = extra_repr();
  if (children_.empty()) return type_name() + "(" + extra + ")";
  std::string s = type_name() + "(\n";
  auto add_indented = [&](const std::string& text) {
    // Children's own lines are indented one more level, as PyTorch's _addindent.
    std::string line;
    std::istringstream in(text);
    bool first = true;
    while (std::getline(in, line)) {
      s += (first ? "" : "\n  ") + line;
      first = false;
    }
  };
  if (!extra.empty()) {
    s += "  ";
    add_indented(extra);
    s += "\n";
  }
  for (const auto& [n, c] : children_) {
    s += "  (" + n + "): ";
    add_indented(c->str());
    s += "\n";
  }
  return s + ")";
}

}  // namespace tcv::nn

namespace tcv::nn {

std::string repr_float(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);
  const int exp = std::stoi(sci.substr(sci.find('e') + 1));
  // Python switches to exponent notation below 1e-4 and from 1e16 on.
  if (v != 0.0 && (exp < -4 || exp >= 16)) return sci;
  r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed);
  std::string fixed(buf, r.ptr);
  if (fixed.find('.') == std::string::npos) fixed += ".0";
  return fixed;
}

}  // namespace tcv::nn
