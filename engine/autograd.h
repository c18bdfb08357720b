// Define-by-run autograd: nodes, saved tensors, the backward engine, hooks
// and end-of-backward callbacks.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace tcv {

/// An input slot of a node: gradients flow to `node`'s input number `input_nr`.
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

/// Metadata of one forward output, so a missing gradient can become zeros.
struct OutputMeta {
  Shape shape;
  DType dtype = DType::f32;
  Device device;
};

/// A step of the backward graph: maps gradients of its forward outputs to
/// gradients of its forward inputs (one per next edge).
class Node {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// grads: one per forward output (missing ones are zeros). Returns one per input
  /// (undefined where that input needs none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>& grads) = 0;
  virtual std::string name() const = 0;
  /// Frees what the node saved; called after a backward without retain_graph.
  virtual void release() {}

  std::vector<Edge> next_edges;
  std::vector<OutputMeta> outputs;
  uint64_t sequence_nr;  ///< creation order; later nodes run first in backward
};

/// Accumulates into a leaf's .grad, then runs its post-accumulate-grad hooks.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  const Tensor& variable() const { return variable_; }

 private:
  Tensor variable_;
};

/// A tensor kept for backward; detects in-place changes after it was saved.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  /// The saved value; throws if it was modified in place since.
  Tensor get() const;
  bool defined() const { return data_.defined(); }

 private:
  Tensor data_;  // detached alias: shares storage (and version) but not the graph
  uint32_t version_ = 0;
};

using BackwardFn = std::function<std::vector<Tensor>(std::vector<Tensor>& grads)>;

/// A node whose backward is a closure holding just what it needs.
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, BackwardFn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override;
  std::string name() const override { return name_; }
  void release() override { fn_ = nullptr; }

 private:
  std::string name_;
  BackwardFn fn_;
};

namespace autograd {

/// Whether operations record the graph (thread-local; on by default).
bool grad_enabled();
void set_grad_enabled(bool enabled);

/// True when recording is on and any input requires grad.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

/// The edge a gradient for `t` flows into (its grad_fn, its accumulator, or none).
Edge gradient_edge(const Tensor& t);

/// Records `outputs` as made by a node running `fn` over `inputs`. Does nothing
/// unless needs_grad(inputs). fn returns one gradient per input.
void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn fn);

/// Runs backward from `roots` seeded with `grads` (ones for scalars when undefined).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {},
              bool retain_graph = false);

/// Queues fn to run once the current backward pass has finished every node.
/// Only valid while backward runs (e.g. from a hook), like PyTorch's
/// Variable._execution_engine.queue_callback.
void queue_callback(std::function<void()> fn);

/// True while this thread is inside backward().
bool in_backward();

}  // namespace autograd

/// Disables graph recording in a scope.
class NoGradGuard {
 public:
  NoGradGuard() : prev_(autograd::grad_enabled()) { autograd::set_grad_enabled(false); }
  ~NoGradGuard() { autograd::set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace tcv
