// The c10 CPU allocator and the global RecordFunction observer (see torch_hooks.hpp).
//
// Note [CPU allocator]
// While a profile is recorded (or a host runtime is installed) CPU tensors come from the session's
// HostMemory (page-aligned, trackable); otherwise from c10::alloc_cpu like PyTorch's default
// allocator. Every DataPtr has context == data and one deleter that asks the HostMemory whether it owns
// the pointer, so raw_allocate/raw_deallocate keep working and tensors outlive any mode change.
// Allocation failure in HostMemory raises c10::OutOfMemoryError (Python: torch.OutOfMemoryError /
// RuntimeError) naming the source.
//
// Note [Op observer]
// Two global callbacks, registered once and never removed (removing callbacks while other threads run
// ops is a known PyTorch pitfall), enabled one at a time:
//   - the full observer (every scope, inputs and outputs) while the session wants ops: it passes op
//     names always and, while a profile is recorded, tensor *storage* data pointers (the allocation's
//     base; views map to their base tensor). Phases: autograd nodes (RecordScope::BACKWARD_FUNCTION,
//     and the engine's `autograd::engine::evaluate_function: ...` wrappers around them) are backward, `Optimizer.step#` / `Optimizer.zero_grad#` scopes are optimizer, the rest inherit
//     from the enclosing op. The end of `Optimizer.step#...` marks an iteration.
//   - the step observer (USER_SCOPE only, no inputs) afterwards: it only marks iterations at the end of
//     `Optimizer.step#...`. ATen ops then run without RecordFunction (no callback wants their scope),
//     so the steady state pays nothing for ops.
#include "integrations/torch/torch_hooks.hpp"

#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include <ATen/record_function.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include "runtime/session/session.hpp"
#include "integrations/torch/python_source.hpp"
#include "integrations/torch/torch_compat.hpp"

namespace tierpack::torch_hooks {
namespace {

// Process-wide (torch forces it: allocators and callbacks are global). Set once by install().
std::atomic<Session*> g_session{nullptr};
std::atomic<bool> g_observer_enabled{false};
at::CallbackHandle g_callback = 0;       // the full observer
at::CallbackHandle g_step_callback = 0;  // optimizer steps only
std::mutex g_install_mu;

void delete_cpu(void* p) {
  if (!p) return;
  Session* s = g_session.load(std::memory_order_acquire);
  HostMemory* mem = s ? s->host_memory() : nullptr;
  if (s) s->on_free(p, -1);
  if (mem && mem->owns(p)) mem->deallocate(p);
  else c10::free_cpu(p);
}

class CpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) TIERPACK_ALLOCATE_CONST override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return {nullptr, nullptr, &delete_cpu, cpu};
    Session* s = g_session.load(std::memory_order_acquire);
    // Where the Python program is (Note [Python source]): only while the profiler asks, before any
    // tierpack lock is taken (it may wait for the GIL).
    const SourceRef source = s && s->wants_sources() ? python_source::current() : SourceRef{};
    HostMemory* mem = s ? s->host_memory_for_new() : nullptr;
    void* p = nullptr;
    bool trackable = false;
    if (mem) {
      p = mem->allocate(n);
      TORCH_CHECK_WITH(OutOfMemoryError, p != nullptr, "tierpack: ", std::string(mem->name()),
                       " could not allocate ", n, " bytes");
      trackable = mem->page_trackable();
    } else {
      p = c10::alloc_cpu(n);  // throws like PyTorch's default allocator
    }
    if (s) s->on_alloc(p, n, -1, 0, trackable, source);
    return {p, p, &delete_cpu, cpu};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &delete_cpu; }
  TIERPACK_ALLOCATOR_COPY_DATA
};

CpuAllocator& cpu_allocator() {
  static CpuAllocator* a = new CpuAllocator();  // static lifetime, as c10::SetAllocator requires
  return *a;
}

// ---- op observer ---------------------------------------------------------------------------------

using Pointers = std::vector<const void*>;

void add_tensor(const at::Tensor& t, Pointers& out) {
  if (!t.defined() || !t.has_storage()) return;
  const void* p = t.storage().data();
  if (p) out.push_back(p);
}

void collect(const c10::IValue& v, Pointers& out, int depth = 0) {
  if (v.isTensor()) {
    add_tensor(v.toTensor(), out);
  } else if (v.isTensorList()) {
    const c10::List<at::Tensor> list = v.toTensorList();
    for (std::size_t i = 0; i < list.size(); ++i) add_tensor(list.get(i), out);
  } else if (depth < 2 && v.isList()) {
    for (const c10::IValue& e : v.toListRef()) collect(e, out, depth + 1);
  } else if (depth < 2 && v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) collect(e, out, depth + 1);
  }
}

bool starts_with(const char* s, const char* prefix) { return std::strncmp(s, prefix, std::strlen(prefix)) == 0; }

struct OpContext final : at::ObserverContext {
  Session::OpToken token = 0;
  bool optimizer_step = false;
};

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  Session* s = g_session.load(std::memory_order_acquire);
  if (!s || !s->wants_ops()) return nullptr;
  const char* name = fn.name();
  if (!name) return nullptr;
  Phase phase = Phase::unknown;
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION || starts_with(name, "autograd::engine::evaluate_function"))
    phase = Phase::backward;
  const bool step = starts_with(name, "Optimizer.step#");
  if (step || starts_with(name, "Optimizer.zero_grad#")) phase = Phase::optimizer;
  thread_local Pointers inputs;
  inputs.clear();
  if (s->wants_op_tensors()) {
    try {
      for (const c10::IValue& v : fn.inputs()) collect(v, inputs);
    } catch (...) {
      inputs.clear();  // an input we cannot read: record the op without it
    }
  }
  // A context for every op (even when the recorder gave no token): listeners (the run controller)
  // pair op ends with their begins.
  const Session::OpToken token = s->op_begin(name, inputs, phase);
  auto ctx = std::make_unique<OpContext>();
  ctx->token = token;
  ctx->optimizer_step = step;
  return ctx;
}

void on_op_end(const at::RecordFunction& fn, at::ObserverContext* raw) {
  if (!raw) return;
  Session* s = g_session.load(std::memory_order_acquire);
  if (!s) return;
  auto* ctx = static_cast<OpContext*>(raw);
  thread_local Pointers outputs;
  outputs.clear();
  if (s->wants_op_tensors()) {
    try {
      for (const c10::IValue& v : fn.outputs()) collect(v, outputs);
    } catch (...) {
      outputs.clear();
    }
  }
  const char* name = fn.name();
  s->op_end(ctx->token, name ? std::string_view(name) : std::string_view(), outputs);
  if (ctx->optimizer_step) s->mark_iteration(IterationSource::optimizer_step);
  if (!s->wants_ops()) refresh_observer();
}

std::unique_ptr<at::ObserverContext> on_step_start(const at::RecordFunction&) { return nullptr; }

void on_step_end(const at::RecordFunction& fn, at::ObserverContext*) {
  Session* s = g_session.load(std::memory_order_acquire);
  const char* name = fn.name();
  if (s && name && starts_with(name, "Optimizer.step#") && s->wants_iterations())
    s->mark_iteration(IterationSource::optimizer_step);
  if (s && s->wants_ops()) refresh_observer();  // a listener wants ops again
}

}  // namespace

void install(Session* session) {
  std::lock_guard lock(g_install_mu);
  if (g_session.load()) return;
  python_source::init(session == nullptr || session->config().python_source);
  g_session.store(session, std::memory_order_release);
  // Priority above PyTorch's default registration (0): c10 keeps the highest.
  c10::SetAllocator(c10::DeviceType::CPU, &cpu_allocator(), /*priority=*/100);
  g_callback = at::addGlobalCallback(
      at::RecordFunctionCallback(&on_op_start, &on_op_end).needsInputs(true).needsOutputs(true));
  g_step_callback = at::addGlobalCallback(
      at::RecordFunctionCallback(&on_step_start, &on_step_end).scopes({at::RecordScope::USER_SCOPE}));
  at::disableCallback(g_step_callback);
  g_observer_enabled.store(true);  // the session starts after install(); refresh_observer() then
}

void refresh_observer() noexcept {
  Session* s = g_session.load(std::memory_order_acquire);
  if (!s || g_callback == 0) return;
  const bool want = s->wants_ops();
  bool enabled = g_observer_enabled.load();
  if (want == enabled || !g_observer_enabled.compare_exchange_strong(enabled, want)) return;
  try {
    // Never both: the full observer marks optimizer steps itself.
    if (want) {
      at::disableCallback(g_step_callback);
      at::reenableCallback(g_callback);
    } else {
      at::disableCallback(g_callback);
      at::reenableCallback(g_step_callback);
    }
  } catch (...) {
    // Keep the previous state: the callback stays cheap when the session wants nothing.
  }
}

std::string torch_version() {
  return "torch " + std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

}  // namespace tierpack::torch_hooks
