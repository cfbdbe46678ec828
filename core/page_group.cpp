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
  using namespace detail;
  check_keys(j, {"id", "class", "home", "offset", "bytes", "page_size", "tensors", "first_use", "last_use", "pinned"});
  get(j, "id", g.id);
  g.cls = get_parsed(j, "class", parse_tensor_class);
  get(j, "home", g.home);
  get(j, "bytes", g.bytes, std::uint64_t{0}, kMaxBytes, kMaxBytesText);
  get_or(j, "offset", g.offset, std::uint64_t{0}, kMaxTotalBytes, kMaxTotalBytesText);
  // Required: a group's page size decides how it is mapped and moved; no default can stand in for it.
  get(j, "page_size", g.page_size, std::uint64_t{1}, kMaxPageSize, kMaxPageSizeText);
  check_page_size("page_size", g.page_size);
  get_or(j, "tensors", g.tensors);
  get_or(j, "first_use", g.first_use, kBeforeIteration, kAfterIteration);
  get_or(j, "last_use", g.last_use, kBeforeIteration, kAfterIteration);
  get_or(j, "pinned", g.pinned);
}

}  // namespace tierpack
