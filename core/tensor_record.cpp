// JSON form of op, tensor and page records; names of phases and tensor classes.
#include "core/tensor_record.hpp"

#include "core/detail/json_util.hpp"
#include "core/tensor_class.hpp"

namespace tierpack {
namespace {
constexpr std::pair<std::string_view, Phase> kPhases[] = {{"unknown", Phase::unknown},
                                                          {"forward", Phase::forward},
                                                          {"backward", Phase::backward},
                                                          {"optimizer", Phase::optimizer}};
constexpr std::pair<std::string_view, TensorClass> kClasses[] = {{"temporary", TensorClass::temporary},
                                                                 {"activation", TensorClass::activation},
                                                                 {"iteration", TensorClass::iteration},
                                                                 {"persistent", TensorClass::persistent}};
}  // namespace

std::string_view to_string(Phase p) { return detail::enum_name(p, kPhases); }
Phase parse_phase(std::string_view text) { return detail::enum_from_name("phase", text, kPhases); }
std::string_view to_string(TensorClass c) { return detail::enum_name(c, kClasses); }
TensorClass parse_tensor_class(std::string_view text) {
  return detail::enum_from_name("tensor class", text, kClasses);
}

std::string SourceLocation::short_text() const {
  if (file.empty()) return {};
  const auto slash = file.find_last_of('/');
  std::string text = slash == std::string::npos ? file : file.substr(slash + 1);
  if (line > 0) text += ":" + std::to_string(line);
  if (!function.empty()) text += " " + function;
  return text;
}

void to_json(nlohmann::json& j, const SourceLocation& r) {
  j = nlohmann::json{{"file", r.file}, {"line", r.line}, {"function", r.function}};
  if (!r.module.empty()) j["module"] = r.module;  // version 3; absent: no module
}

void from_json(const nlohmann::json& j, SourceLocation& r) {
  using namespace detail;
  check_keys(j, {"file", "line", "function", "module"});
  get(j, "file", r.file);
  if (r.file.empty()) throw format_error("field 'file' is empty");
  get_or(j, "line", r.line, 0, std::numeric_limits<std::int32_t>::max());
  get_or(j, "function", r.function);
  get_or(j, "module", r.module);
  // Dotted names, none empty: "a..b" or ".a" is no module path (named_modules() never gives one).
  const auto& m = r.module;
  if (!m.empty() && (m.front() == '.' || m.back() == '.' || m.find("..") != std::string::npos))
    throw format_error("field 'module' = " + nlohmann::json(m).dump() +
                       " is not a module path (an empty name between dots)");
}

void to_json(nlohmann::json& j, const OpRecord& r) {
  j = nlohmann::json{{"index", r.index},   {"name", r.name},     {"begin_ns", r.begin_ns},
                     {"end_ns", r.end_ns}, {"thread", r.thread}, {"parent", r.parent},
                     {"phase", to_string(r.phase)}, {"inputs", r.inputs}, {"outputs", r.outputs}};
}

void from_json(const nlohmann::json& j, OpRecord& r) {
  using namespace detail;
  check_keys(j, {"index", "name", "begin_ns", "end_ns", "thread", "parent", "phase", "inputs", "outputs"});
  get(j, "index", r.index);
  get(j, "name", r.name);
  get(j, "begin_ns", r.begin_ns, std::uint64_t{0}, kMaxNs, kMaxNsText);
  get(j, "end_ns", r.end_ns, std::uint64_t{0}, kMaxNs, kMaxNsText);
  get_or(j, "thread", r.thread);
  get_or(j, "parent", r.parent, -1, std::numeric_limits<std::int32_t>::max());
  r.phase = j.contains("phase") ? get_parsed(j, "phase", parse_phase) : Phase::unknown;
  get_or(j, "inputs", r.inputs);
  get_or(j, "outputs", r.outputs);
}

void to_json(nlohmann::json& j, const TensorRecord& r) {
  j = nlohmann::json{{"id", r.id},
                     {"seq", r.seq},
                     {"bytes", r.bytes},
                     {"device", r.device},
                     {"stream", r.stream},
                     {"address", r.address},
                     {"alloc_op", r.alloc_op},
                     {"birth_op", r.birth_op},
                     {"death_op", r.death_op},
                     {"birth_ns", r.birth_ns},
                     {"death_ns", r.death_ns},
                     {"uses", r.uses},
                     {"pages", r.pages},
                     {"pages_touched", r.pages_touched},
                     {"page_touches", r.page_touches},
                     {"pages_written", r.pages_written},
                     {"tier", r.tier},
                     {"flags", r.flags}};
  if (r.source >= 0) j["source"] = r.source;  // version 2; absent: unknown
}

void from_json(const nlohmann::json& j, TensorRecord& r) {
  using namespace detail;
  check_keys(j, {"id", "seq", "bytes", "device", "stream", "address", "alloc_op", "birth_op", "death_op", "birth_ns",
                 "death_ns", "uses", "pages", "pages_touched", "page_touches", "pages_written", "tier", "flags", "source"});
  get(j, "id", r.id);
  get(j, "seq", r.seq, std::int64_t{-1}, std::numeric_limits<std::int64_t>::max());
  get(j, "bytes", r.bytes, std::uint64_t{0}, kMaxBytes, kMaxBytesText);
  get(j, "birth_op", r.birth_op);
  get(j, "death_op", r.death_op);
  get_or(j, "device", r.device, -1, kMaxDevice);
  get_or(j, "stream", r.stream);
  get_or(j, "address", r.address);
  get_or(j, "alloc_op", r.alloc_op);
  get_or(j, "birth_ns", r.birth_ns, std::uint64_t{0}, kMaxNs, kMaxNsText);
  get_or(j, "death_ns", r.death_ns, std::uint64_t{0}, kMaxNs, kMaxNsText);
  get_or(j, "uses", r.uses);
  get_or(j, "pages", r.pages);
  get_or(j, "pages_touched", r.pages_touched);
  get_or(j, "page_touches", r.page_touches);
  get_or(j, "pages_written", r.pages_written);
  get_or(j, "tier", r.tier);
  get_or(j, "flags", r.flags);
  // An index into the profile's sources: Profile::validate() checks it against their number.
  get_or(j, "source", r.source, -1, std::numeric_limits<std::int32_t>::max());
}

void to_json(nlohmann::json& j, const PageRecord& r) {
  j = nlohmann::json{{"address", r.address},           {"numa_node", r.numa_node},
                     {"tensors", r.tensors},           {"touch_windows", r.touch_windows},
                     {"hidden_windows", r.hidden_windows}, {"written", r.written},
                     {"false_shared", r.false_shared}};
}

void from_json(const nlohmann::json& j, PageRecord& r) {
  using namespace detail;
  check_keys(j, {"address", "numa_node", "tensors", "touch_windows", "hidden_windows", "written", "false_shared"});
  get(j, "address", r.address);
  get(j, "tensors", r.tensors);
  // move_pages(2) status: a node, or a negative errno (-ENOENT: not present) for a page it could not place.
  get_or(j, "numa_node", r.numa_node, -4095, kMaxDevice);
  get_or(j, "touch_windows", r.touch_windows);
  get_or(j, "hidden_windows", r.hidden_windows);
  get_or(j, "written", r.written);
  get_or(j, "false_shared", r.false_shared);
}

}  // namespace tierpack
