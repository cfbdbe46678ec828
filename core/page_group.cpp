// JSON form of page groups (see page_group.hpp).
#include "core/page_group.hpp"

#include "core/detail/json_util.hpp"

namespace tierpack {

void to_json(nlohmann::json& j, const PageGroup& g) {
  j = nlohmann::json{{"id", g.id},
                     {"class", to_string(g.cls)},
                     {"home", g.home},
                     {"offset", g.offset},
                     {"bytes", g.bytes},
                     {"page_size", g.page_size},
                     {"tensors", g.tensors},
                     {"first_use", g.first_use},
                     {"last_use", g.last_use},
                     {"pinned", g.pinned}};
}

void from_json(const nlohmann::json& j, PageGroup& g) {
  detail::read(j.at("id"), g.id);
  g.cls = parse_tensor_class(j.at("class").get<std::string>());
  detail::read(j.at("home"), g.home);
  detail::read(j.at("bytes"), g.bytes);
  detail::get_or(j, "offset", g.offset);
  detail::get_or(j, "page_size", g.page_size);
  detail::get_or(j, "tensors", g.tensors);
  detail::get_or(j, "first_use", g.first_use);
  detail::get_or(j, "last_use", g.last_use);
  detail::get_or(j, "pinned", g.pinned);
}

}  // namespace tierpack
