// Shared by the libFuzzer targets: runs one parse and decides what counts as a bug. A clean
// rejection is a tierpack::logic_error (format_error included) with a message; any other exception
// type, an empty message, or a failed round trip is a bug: abort() so libFuzzer saves the input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>
#include <typeinfo>

#include "core/error.hpp"

namespace tierpack::fuzz {

[[noreturn]] inline void bug(std::string_view what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz target found a bug: %.*s%s%.*s\n", int(what.size()), what.data(), detail.empty() ? "" : ": ",
               int(detail.size()), detail.data());
  std::abort();
}

/// Runs f(); returns true when it returned, false when it rejected the input cleanly.
template <class F>
bool accepts(F&& f) {
  try {
    f();
    return true;
  } catch (const tierpack::logic_error& e) {
    if (std::string_view(e.what()).empty()) bug("rejection with an empty message");
    return false;
  } catch (const std::exception& e) {
    // os_error, out_of_memory, std::bad_alloc, std::length_error, nlohmann::json::exception...:
    // parsing bytes in memory must never end in any of these.
    std::fprintf(stderr, "fuzz target found a bug: exception of type %s (not a tierpack rejection): %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    bug("exception of unknown type");
  }
}

}  // namespace tierpack::fuzz
