// What the profiler knows about one tensor of the profiled iteration, and about the ops that
// touched it. Tensor identity across iterations is its allocation sequence position (`seq`) plus
// size and allocating op (see BRIEF.md, "Tensor identity across iterations").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/tier.hpp"

namespace tierpack {

/// Index of a tensor inside Profile::tensors.
using TensorId = std::uint32_t;
/// Index of an op inside Profile::ops (the iteration's op sequence).
using OpIndex = std::int32_t;
inline constexpr OpIndex kBeforeIteration = -1;  ///< born before the profiled iteration began
inline constexpr OpIndex kAfterIteration = 0x7fffffff;  ///< still alive when the iteration ended

/// Which part of a training step an op belongs to, when the framework tells us.
enum class Phase : std::uint8_t { unknown, forward, backward, optimizer };
std::string_view to_string(Phase p);
Phase parse_phase(std::string_view text);

struct OpRecord {
  OpIndex index = 0;
  std::string name;                ///< "aten::mm", "Optimizer.step#AdamW.step", ...
  std::uint64_t begin_ns = 0;      ///< relative to the iteration's start
  std::uint64_t end_ns = 0;
  std::uint32_t thread = 0;        ///< small per-profile thread number
  std::int32_t parent = -1;        ///< enclosing op (RecordFunction nesting), -1 at top level
  Phase phase = Phase::unknown;
  std::vector<std::uint32_t> inputs;   ///< TensorIds read
  std::vector<std::uint32_t> outputs;  ///< TensorIds written

  friend bool operator==(const OpRecord&, const OpRecord&) = default;
};

enum TensorFlags : std::uint32_t {
  kTensorSavedForBackward = 1u << 0,  ///< packed by autograd's saved-tensor hooks
  kTensorHiddenAccess = 1u << 1,      ///< OS saw accesses in windows where no reported op used it
  kTensorFalseShared = 1u << 2,       ///< shares a page with a tensor of another lifetime class
  kTensorParameter = 1u << 3,         ///< framework says: a parameter
  kTensorGradient = 1u << 4,          ///< framework says: a gradient
  kTensorOptimizerState = 1u << 5,    ///< framework says: optimizer state
};

/// Where the program allocated a tensor: for a Python program the innermost frame outside torch's
/// (and tierpack's) own files when the allocation happened, and the innermost nn.Module whose forward
/// was running (Note [Python source] and Note [Module paths] in integrations/torch/python_source.cpp).
/// Interned in Profile::sources; tensors carry an index.
struct SourceLocation {
  std::string file;        ///< as the interpreter names it: "/home/me/model.py", "<stdin>"
  std::int32_t line = 0;   ///< 1-based; 0 unknown
  std::string function;    ///< "forward", "<module>"
  /// The module path: the running module as its root model's named_modules() names it
  /// ("transformer.h.3.mlp.c_fc"), the root itself by its class name ("GPT2"); "" when no module's
  /// forward was running (or unknown: profiles before version 3).
  std::string module = {};

  /// "model.py:63 forward": the file's last path component, the line, the function.
  std::string short_text() const;
  friend bool operator==(const SourceLocation&, const SourceLocation&) = default;
};

struct TensorRecord {
  std::uint32_t id = 0;            ///< TensorId: index in Profile::tensors
  std::int64_t seq = -1;           ///< allocation position within the iteration (-1: allocated before it)
  std::uint64_t bytes = 0;
  int device = -1;                 ///< -1 host, >= 0 CUDA ordinal
  std::uint64_t stream = 0;
  std::uint64_t address = 0;       ///< address while profiled (for the page join and reports)
  std::string alloc_op;            ///< op running when it was allocated ("" if none)
  OpIndex birth_op = kBeforeIteration;  ///< first op index at/after allocation
  OpIndex death_op = kAfterIteration;   ///< op index current at free
  std::uint64_t birth_ns = 0;
  std::uint64_t death_ns = 0;
  std::vector<OpIndex> uses;       ///< ops that read or wrote it, ascending
  std::uint32_t pages = 0;         ///< host pages it spans
  std::uint32_t pages_touched = 0; ///< distinct pages the OS saw touched during the iteration
  std::uint64_t page_touches = 0;  ///< sum over op windows of pages touched
  std::uint64_t pages_written = 0; ///< pages found written (PAGEMAP_SCAN / soft-dirty)
  TierId tier = kNoTier;           ///< tier its pages lived on (majority)
  std::uint32_t flags = 0;         ///< TensorFlags
  std::int32_t source = -1;        ///< index into Profile::sources (-1: unknown)

  bool has(TensorFlags f) const { return (flags & f) != 0; }
  friend bool operator==(const TensorRecord&, const TensorRecord&) = default;
};

/// One host page that tells something: shared by several tensors, or touched behind the framework's back.
struct PageRecord {
  std::uint64_t address = 0;
  int numa_node = -1;                   ///< from move_pages status (-1 unknown / not present)
  std::vector<std::uint32_t> tensors;   ///< TensorIds with bytes on this page
  std::uint32_t touch_windows = 0;      ///< op windows in which it was touched
  std::uint32_t hidden_windows = 0;     ///< windows touched with no reported op using a tensor on it
  bool written = false;
  bool false_shared = false;            ///< holds tensors of different lifetime classes

  friend bool operator==(const PageRecord&, const PageRecord&) = default;
};

void to_json(nlohmann::json& j, const SourceLocation& r);
void from_json(const nlohmann::json& j, SourceLocation& r);
void to_json(nlohmann::json& j, const OpRecord& r);
void from_json(const nlohmann::json& j, OpRecord& r);
void to_json(nlohmann::json& j, const TensorRecord& r);
void from_json(const nlohmann::json& j, TensorRecord& r);
void to_json(nlohmann::json& j, const PageRecord& r);
void from_json(const nlohmann::json& j, PageRecord& r);

}  // namespace tierpack
