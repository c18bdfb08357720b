#include "engine/autograd.h"

#include "engine/autocast.h"

#include <atomic>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "engine/ops.h"

namespace tcv {

namespace {
std::atomic<uint64_t> g_sequence{0};
thread_local bool t_grad_enabled = true;
thread_local int t_backward_depth = 0;
thread_local std::vector<std::function<void()>>* t_callbacks = nullptr;
}  // namespace

Node::Node() : sequence_nr(g_sequence.fetch_add(1, std::memory_order_relaxed)) {}

// ---------------------------------------------------------------- saved tensors

SavedTensor::SavedTensor(const Tensor& t) {
  if (!t.defined()) return;
  data_ = t.detach();
  version_ = t.version();
}

Tensor SavedTensor::get() const {
  if (!data_.defined()) return data_;
  TCV_CHECK(data_.version() == version_, "[autograd] a tensor of shape ", data_.shape_str(),
            " saved for backward was modified in place after it was saved (version ",
            data_.version(), ", expected ", version_,
            "); make a copy before changing it, or change it under NoGradGuard after backward");
  return data_;
}

// ---------------------------------------------------------------- nodes

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>& grads) {
  TCV_CHECK(fn_ != nullptr, "[autograd] backward through ", name_,
            " a second time: its saved tensors were freed; pass retain_graph=true to the first "
            "backward");
  return fn_(grads);
}

AccumulateGrad::AccumulateGrad(Tensor variable) : variable_(std::move(variable)) {
  outputs.push_back({variable_.shape(), variable_.dtype(), variable_.device()});
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>& grads) {
  Tensor& g = grads[0];
  AutogradMeta& meta = variable_.autograd_meta();
  TCV_CHECK(g.shape() == variable_.shape(), "[AccumulateGrad] gradient of shape ", g.shape_str(),
            " for a parameter of shape ", variable_.shape_str());
  if (!meta.grad.defined()) {
    // Steal the buffer when nobody else can see it; otherwise copy, so two
    // leaves never alias one gradient (add's backward hands out g twice).
    const bool exclusive = g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 &&
                           g.is_contiguous() && g.dtype() == variable_.dtype();
    meta.grad = exclusive ? g.detach() : g.to(variable_.dtype()).clone().detach();
  } else {
    // In place, so gradients that are views into a flat buffer stay views.
    meta.grad.add_(g);
  }
  // Copy the hook list: a hook may register or remove hooks.
  auto hooks = meta.post_acc_hooks;
  for (auto& [id, hook] : hooks) hook(variable_);
  return {};
}

// ---------------------------------------------------------------- recording

namespace autograd {

bool grad_enabled() {
  return t_grad_enabled;
}
void set_grad_enabled(bool enabled) {
  t_grad_enabled = enabled;
}
bool in_backward() {
  return t_backward_depth > 0;
}

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!t_grad_enabled) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!t_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  AutogradMeta& m = t.autograd_meta();
  if (m.grad_fn) return {m.grad_fn, m.output_nr};
  std::shared_ptr<Node> acc = m.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    m.grad_accumulator = acc;
  }
  return {acc, 0};
}

void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn fn) {
  if (!needs_grad(inputs)) return;
  auto node = std::make_shared<FunctionNode>(name, std::move(fn));
  node->next_edges.reserve(inputs.size());
  for (const Tensor& t : inputs) node->next_edges.push_back(gradient_edge(t));
  uint32_t nr = 0;
  for (const Tensor& out : outputs) {
    node->outputs.push_back({out.shape(), out.dtype(), out.device()});
    if (!out.defined() || !is_floating(out.dtype())) {
      ++nr;
      continue;
    }
    AutogradMeta& m = out.autograd_meta();
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = nr++;
  }
}

void queue_callback(std::function<void()> fn) {
  TCV_CHECK(t_callbacks != nullptr,
            "[autograd] queue_callback is only valid while backward runs (call it from a hook)");
  t_callbacks->push_back(std::move(fn));
}

// ---------------------------------------------------------------- the engine

namespace {

struct ReadyOrder {
  // Later-created nodes first: that is a topological order of the backward graph,
  // and it runs the gradients of late layers (and so their all-reduce) first.
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
              bool retain_graph) {
  TCV_CHECK(grads.empty() || grads.size() == roots.size(), "[backward] ", roots.size(),
            " roots but ", grads.size(), " gradients");
  NoGradGuard no_grad;                 // backward formulas are not themselves differentiated
  autocast::Guard no_autocast(false);  // gradients keep the dtypes forward gave them

  std::unordered_map<Node*, std::vector<Tensor>> buffers;  // node -> grads of its outputs
  std::unordered_map<Node*, int> dependencies;
  std::vector<std::shared_ptr<Node>> keep_alive;

  auto add_grad = [&](const Edge& e, Tensor g) {
    auto& buf = buffers[e.node.get()];
    if (buf.empty()) buf.resize(e.node->outputs.size());
    Tensor& slot = buf[e.input_nr];
    if (!slot.defined()) {
      slot = std::move(g);
    } else if (slot.impl_ptr().use_count() == 1 && slot.storage().use_count() == 1 &&
               slot.is_contiguous() && slot.shape() == g.shape()) {
      slot.add_(g);
    } else {
      slot = ops::add(slot, g);
    }
  };

  std::vector<Edge> root_edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    TCV_CHECK(r.requires_grad(), "[backward] tensor of shape ", r.shape_str(),
              " does not require grad and has no grad_fn");
    Tensor g = grads.empty() ? Tensor() : grads[i];
    if (!g.defined()) {
      TCV_CHECK(r.numel() == 1,
                "[backward] grad can be implicit only for scalar outputs, got shape ",
                r.shape_str());
      g = ones_like(r);
    }
    TCV_CHECK(g.shape() == r.shape(), "[backward] gradient of shape ", g.shape_str(),
              " for an output of shape ", r.shape_str());
    Edge e = gradient_edge(r);
    root_edges.push_back(e);
    add_grad(e, g);
  }

  // Count, for each node, how many edges from reachable nodes point at it.
  {
    std::vector<Node*> stack;
    std::unordered_set<Node*> seen;
    for (const Edge& e : root_edges) {
      if (seen.insert(e.node.get()).second) {
        stack.push_back(e.node.get());
        keep_alive.push_back(e.node);
      }
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next_edges) {
        if (!e.valid()) continue;
        dependencies[e.node.get()] += 1;
        if (seen.insert(e.node.get()).second) {
          stack.push_back(e.node.get());
          keep_alive.push_back(e.node);
        }
      }
    }
  }

  std::priority_queue<Node*, std::vector<Node*>, ReadyOrder> ready;
  {
    std::unordered_set<Node*> pushed;
    for (const Edge& e : root_edges)
      if (dependencies[e.node.get()] == 0 && pushed.insert(e.node.get()).second)
        ready.push(e.node.get());
  }

  std::vector<std::function<void()>> callbacks;
  auto* prev_callbacks = t_callbacks;
  t_callbacks = &callbacks;
  ++t_backward_depth;
  struct Restore {
    std::vector<std::function<void()>>* prev;
    ~Restore() {
      t_callbacks = prev;
      --t_backward_depth;
    }
  } restore{prev_callbacks};

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    auto it = buffers.find(node);
    std::vector<Tensor> out;
    if (it != buffers.end()) {
      std::vector<Tensor> in = std::move(it->second);
      buffers.erase(it);
      in.resize(node->outputs.size());
      for (size_t i = 0; i < in.size(); ++i) {
        if (!in[i].defined()) {
          const OutputMeta& m = node->outputs[i];
          in[i] = zeros(m.shape, {.dtype = m.dtype, .device = m.device});
        }
      }
      try {
        out = node->apply(in);
      } catch (const Error& err) {
        throw Error(std::string("[backward of ") + node->name() + "] " + err.what());
      }
      // Its saved tensors are done with: free them now, not at the end of
      // backward, so that activations go as backward passes their layers.
      if (!retain_graph) node->release();
      TCV_CHECK(out.empty() || out.size() == node->next_edges.size(), "[backward] ", node->name(),
                " returned ", out.size(), " gradients for ", node->next_edges.size(), " inputs");
    }
    // A node no gradient reached still releases its dependents.
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.valid()) continue;
      if (i < out.size() && out[i].defined()) add_grad(e, std::move(out[i]));
      if (--dependencies[e.node.get()] == 0) ready.push(e.node.get());
    }
  }

  // End-of-backward callbacks, in the order queued; a callback may queue more.
  for (size_t i = 0; i < callbacks.size(); ++i) {
    auto cb = std::move(callbacks[i]);
    cb();
  }
}

}  // namespace autograd
}  // namespace tcv
