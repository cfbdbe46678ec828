// Checkers for the report's machine-readable outputs (see format_checks.hpp).
#include "tests/report/format_checks.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace tierpack::report::testing {

using nlohmann::json;

/// Problems with a trace; empty when it follows the rules.
std::vector<std::string> validate_trace(const nlohmann::json& trace, double end_us) {
  using nlohmann::json;
  std::vector<std::string> bad;
  auto fail = [&](const std::string& what, const json& e) { bad.push_back(what + ": " + e.dump().substr(0, 200)); };
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) return {"no traceEvents array"};
  std::map<std::tuple<int, std::string, std::string>, std::vector<double>> open;  // (pid, cat, id) -> begin ts
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> slices;   // (pid, tid) -> [ts, end]
  std::set<int> named_pids;
  std::set<std::pair<int, int>> named_tids, used_tids;
  for (const auto& e : trace["traceEvents"]) {
    if (!e.contains("ph") || !e["ph"].is_string()) { fail("no ph", e); continue; }
    if (!e.contains("pid") || !e["pid"].is_number_integer()) { fail("no integer pid", e); continue; }
    if (!e.contains("name") || !e["name"].is_string()) { fail("no name", e); continue; }
    const std::string ph = e["ph"];
    const int pid = e["pid"];
    if (ph == "M") {
      const std::string n = e["name"];
      if (n == "process_name") named_pids.insert(pid);
      else if (n == "thread_name") named_tids.insert({pid, e.at("tid").get<int>()});
      else if (n != "process_sort_index") fail("unknown metadata", e);
      if (!e.contains("args") || !e["args"].is_object()) fail("metadata without args", e);
      continue;
    }
    if (!e.contains("ts") || !e["ts"].is_number()) { fail("no numeric ts", e); continue; }
    const double ts = e["ts"];
    if (ts < 0 || ts > end_us + 1e-3) fail("ts outside the iteration (microseconds?)", e);
    if (ph == "X") {
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) { fail("X without dur >= 0", e); continue; }
      const double end = ts + e["dur"].get<double>();
      if (end > end_us + 1e-3) fail("slice ends after the iteration", e);
      const std::pair<int, int> track{pid, e.at("tid").get<int>()};
      slices[track].push_back({ts, end});
      used_tids.insert(track);
    } else if (ph == "b" || ph == "e") {
      if (!e.contains("cat") || !e.contains("id") || !e["id"].is_string()) { fail("async event without cat/id", e); continue; }
      const auto key = std::make_tuple(pid, e["cat"].get<std::string>(), e["id"].get<std::string>());
      if (ph == "b") {
        open[key].push_back(ts);
      } else if (open[key].empty()) {
        fail("async end without begin", e);
      } else {
        if (ts < open[key].back()) fail("async end before its begin", e);
        open[key].pop_back();
      }
    } else if (ph == "C") {
      if (!e.contains("args") || !e["args"].is_object() || e["args"].empty()) { fail("counter without args", e); continue; }
      for (const auto& [k, v] : e["args"].items())
        if (!v.is_number()) fail("counter arg '" + k + "' not numeric", e);
    } else {
      fail("unexpected phase " + ph, e);
    }
    if (!named_pids.count(pid)) fail("event before its process is named", e);
  }
  for (const auto& [key, begins] : open)
    if (!begins.empty()) bad.push_back("async begin without end: id " + std::get<2>(key));
  for (const auto& track : used_tids)
    if (!named_tids.count(track)) bad.push_back("unnamed thread " + std::to_string(track.second) + " of pid " + std::to_string(track.first));
  // Complete slices on one track must nest: sort by start (longer first) and keep a stack.
  for (auto& [track, v] : slices) {
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<double> stack;
    for (const auto& [b, e] : v) {
      while (!stack.empty() && stack.back() <= b + 1e-9) stack.pop_back();
      if (!stack.empty() && e > stack.back() + 1e-9) {
        bad.push_back("slices overlap without nesting on pid " + std::to_string(track.first) + " tid " + std::to_string(track.second));
        break;
      }
      stack.push_back(e);
    }
  }
  return bad;
}

/// Problems with a snapshot; empty when it is self-consistent.
std::vector<std::string> check_snapshot(const nlohmann::json& s) {
  std::vector<std::string> bad;
  for (const char* key : {"segments", "device_traces"})
    if (!s.contains(key) || !s[key].is_array()) return {std::string("missing ") + key};
  // Segments: blocks tile them; sizes add up.
  std::map<int, std::vector<std::pair<std::uint64_t, std::uint64_t>>> seg_ranges;
  std::map<int, std::set<std::pair<std::uint64_t, std::uint64_t>>> active_blocks;
  for (const auto& seg : s["segments"]) {
    for (const char* key : {"device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
                            "segment_type", "blocks"})
      if (!seg.contains(key)) bad.push_back(std::string("segment without ") + key);
    const int dev = seg["device"];
    std::uint64_t at = seg["address"], allocated = 0;
    const std::uint64_t end = at + seg["total_size"].get<std::uint64_t>();
    seg_ranges[dev].push_back({at, end});
    for (const auto& b : seg["blocks"]) {
      if (b.contains("address") && b["address"].get<std::uint64_t>() != at) bad.push_back("blocks do not tile their segment");
      const std::string state = b["state"];
      if (state != "active_allocated" && state != "inactive") bad.push_back("unknown block state " + state);
      if (state == "active_allocated") {
        allocated += b["size"].get<std::uint64_t>();
        active_blocks[dev].insert({at, b["size"].get<std::uint64_t>()});
      }
      if (b["requested_size"].get<std::uint64_t>() > b["size"].get<std::uint64_t>()) bad.push_back("requested > size");
      at += b["size"].get<std::uint64_t>();
    }
    if (at != end) bad.push_back("block sizes do not add up to total_size");
    if (allocated != seg["allocated_size"].get<std::uint64_t>()) bad.push_back("allocated_size is not the active blocks' sum");
  }
  // Traces: replay them.
  const auto& traces = s["device_traces"];
  for (std::size_t dev = 0; dev < traces.size(); ++dev) {
    std::map<std::uint64_t, std::uint64_t> live;  // addr -> size
    std::set<std::uint64_t> requested;
    std::int64_t last_time = 0;
    auto in_segment = [&](std::uint64_t a, std::uint64_t n) {
      for (const auto& [b, e] : seg_ranges[static_cast<int>(dev)])
        if (a >= b && a + n <= e) return true;
      return false;
    };
    for (const auto& e : traces[dev]) {
      for (const char* key : {"action", "addr", "size", "stream", "time_us"})
        if (!e.contains(key)) bad.push_back(std::string("trace entry without ") + key);
      const std::string a = e["action"];
      const std::uint64_t addr = e["addr"], size = e["size"];
      const std::int64_t t = e["time_us"];
      if (t < last_time) bad.push_back("time_us goes backwards");
      last_time = t;
      if (a == "alloc") {
        if (live.count(addr)) bad.push_back("address allocated twice at once");
        auto next = live.lower_bound(addr);
        if (next != live.end() && next->first < addr + size) bad.push_back("alloc overlaps a live block");
        if (next != live.begin() && std::prev(next)->first + std::prev(next)->second > addr) bad.push_back("alloc overlaps a live block");
        live[addr] = size;
        if (!in_segment(addr, size)) bad.push_back("alloc outside every segment");
      } else if (a == "free_requested") {
        if (!live.count(addr) || live[addr] != size) bad.push_back("free_requested without a matching alloc");
        requested.insert(addr);
      } else if (a == "free_completed") {
        if (!requested.count(addr)) bad.push_back("free_completed without free_requested");
        requested.erase(addr);
        live.erase(addr);
      } else if (a != "snapshot") {
        bad.push_back("unexpected action " + a);
      }
    }
    std::set<std::pair<std::uint64_t, std::uint64_t>> end_state(live.begin(), live.end());
    if (end_state != active_blocks[static_cast<int>(dev)]) bad.push_back("trace end state differs from the segments' active blocks");
  }
  return bad;
}

}  // namespace tierpack::report::testing
