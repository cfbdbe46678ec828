// TEMPORARY stand-in until branch `pagedata` (the real tracers and query_page_nodes) is merged:
// no tracer, residency through move_pages. Deleted by the merge.
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "core/error.hpp"
#include "profiler/page_tracer.hpp"

namespace tierpack {

std::unique_ptr<PageTracer> make_page_tracer(PageTracerKind kind, std::string* why) {
  if (kind == PageTracerKind::off || kind == PageTracerKind::automatic) {
    if (why) *why = "page tracers not built in this tree: no page access data";
    return nullptr;
  }
  throw logic_error("page tracer not built in this tree");
}

std::vector<int> query_page_nodes(const std::vector<void*>& pages) {
  std::vector<int> status(pages.size(), -1);
  if (pages.empty()) return status;
  const long rc = ::syscall(SYS_move_pages, 0, pages.size(), pages.data(), nullptr, status.data(), 0);
  if (rc != 0) throw os_error("move_pages", errno);
  return status;
}

}  // namespace tierpack
