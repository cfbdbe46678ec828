// A test double for PageTracer: tracks ranges in a set and reports the touches a test injects.
// Used for the page join's logic only; the real tracers are tested in page_tracer tests.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "profiler/page_tracer.hpp"

namespace tierpack::test {

class FakePageTracer final : public PageTracer {
 public:
  explicit FakePageTracer(std::size_t page = 4096) : page_(page) {}
  std::string_view name() const override { return "fake"; }
  bool sees_reads() const override { return true; }
  void track(void* addr, std::size_t bytes) override {
    ++track_calls;
    for (std::size_t off = 0; off < bytes; off += page_) ++tracked[reinterpret_cast<std::uintptr_t>(addr) + off];
  }
  void untrack(void* addr, std::size_t bytes) noexcept override {
    ++untrack_calls;
    for (std::size_t off = 0; off < bytes; off += page_) {
      auto it = tracked.find(reinterpret_cast<std::uintptr_t>(addr) + off);
      if (it != tracked.end() && --it->second == 0) tracked.erase(it);
    }
  }
  void end_window(std::vector<PageTouch>& out) override {
    ++windows;
    for (const auto& t : pending)
      if (tracked.count(t.page)) out.push_back(t);  // like a real tracer: only watched pages
    pending.clear();
  }
  /// The program touches the page holding addr (reported at the next window end).
  void touch(std::uintptr_t addr, bool written = true) {
    pending.push_back(PageTouch{addr & ~static_cast<std::uintptr_t>(page_ - 1), written});
  }

  std::map<std::uintptr_t, int> tracked;  ///< page -> track count
  std::vector<PageTouch> pending;
  int track_calls = 0, untrack_calls = 0, windows = 0;

 private:
  std::size_t page_;
};

}  // namespace tierpack::test
