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

void to_json(nlohmann::json& j, const OpRecord& r) {
  j = nlohmann::json{{"index", r.index},   {"name", r.name},     {"begin_ns", r.begin_ns},
                     {"end_ns", r.end_ns}, {"thread", r.thread}, {"parent", r.parent},
                     {"phase", to_string(r.phase)}, {"inputs", r.inputs}, {"outputs", r.outputs}};
}

void from_json(const nlohmann::json& j, OpRecord& r) {
  detail::read(j.at("index"), r.index);
  detail::read(j.at("name"), r.name);
  detail::read(j.at("begin_ns"), r.begin_ns);
  detail::read(j.at("end_ns"), r.end_ns);
  detail::get_or(j, "thread", r.thread);
  detail::get_or(j, "parent", r.parent);
  r.phase = j.contains("phase") ? parse_phase(j.at("phase").get<std::string>()) : Phase::unknown;
  detail::get_or(j, "inputs", r.inputs);
  detail::get_or(j, "outputs", r.outputs);
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
}

void from_json(const nlohmann::json& j, TensorRecord& r) {
  detail::read(j.at("id"), r.id);
  detail::read(j.at("seq"), r.seq);
  detail::read(j.at("bytes"), r.bytes);
  detail::read(j.at("birth_op"), r.birth_op);
  detail::read(j.at("death_op"), r.death_op);
  detail::get_or(j, "device", r.device);
  detail::get_or(j, "stream", r.stream);
  detail::get_or(j, "address", r.address);
  detail::get_or(j, "alloc_op", r.alloc_op);
  detail::get_or(j, "birth_ns", r.birth_ns);
  detail::get_or(j, "death_ns", r.death_ns);
  detail::get_or(j, "uses", r.uses);
  detail::get_or(j, "pages", r.pages);
  detail::get_or(j, "pages_touched", r.pages_touched);
  detail::get_or(j, "page_touches", r.page_touches);
  detail::get_or(j, "pages_written", r.pages_written);
  detail::get_or(j, "tier", r.tier);
  detail::get_or(j, "flags", r.flags);
}

void to_json(nlohmann::json& j, const PageRecord& r) {
  j = nlohmann::json{{"address", r.address},           {"numa_node", r.numa_node},
                     {"tensors", r.tensors},           {"touch_windows", r.touch_windows},
                     {"hidden_windows", r.hidden_windows}, {"written", r.written},
                     {"false_shared", r.false_shared}};
}

void from_json(const nlohmann::json& j, PageRecord& r) {
  detail::read(j.at("address"), r.address);
  detail::read(j.at("tensors"), r.tensors);
  detail::get_or(j, "numa_node", r.numa_node);
  detail::get_or(j, "touch_windows", r.touch_windows);
  detail::get_or(j, "hidden_windows", r.hidden_windows);
  detail::get_or(j, "written", r.written);
  detail::get_or(j, "false_shared", r.false_shared);
}

}  // namespace tierpack
