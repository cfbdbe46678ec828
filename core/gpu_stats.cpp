#include "core/gpu_stats.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/process_rank.hpp"
#include "core/units.hpp"

namespace tierpack {

std::vector<std::pair<int, std::string>> gpu_stats_files(const std::string& stats_path) {
  std::vector<std::pair<int, std::string>> out;
  std::error_code ec;
  for (int d = 0; d < 64; ++d) {
    std::string p = device_sibling_path(stats_path, d, ".json");
    if (std::filesystem::exists(p, ec)) out.emplace_back(d, std::move(p));
  }
  return out;
}

namespace {

// "predicted step 200.0 ms, measured 230.0 ms (median of 3 step(s), +15.0%)": the plan's predicted step beside the
// steps it ran (Note [Measured plans] in python/tierpack/measured_plans.py), where the plan has both.
std::string measured_step(const nlohmann::json& plan) {
  const auto steps = plan.value("step_ms_measured", nlohmann::json::array());
  std::vector<double> ms;
  for (const auto& s : steps)
    if (s.is_number()) ms.push_back(s.get<double>());
  const double predicted = plan.value("predicted_ms", 0.0);
  if (ms.empty() || predicted <= 0) return {};
  std::sort(ms.begin(), ms.end());
  const std::size_t n = ms.size();
  const double median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  char out[128];
  std::snprintf(out, sizeof out, ", predicted step %.1f ms, measured %.1f ms (median of %zu step(s), %+.1f%%)",
                predicted, median, n, (median / predicted - 1) * 100);
  return out;
}

// "; a plan made for the hooks' host time ran 300.0 ms a step against 220.0 ms: the plan from iteration 9 came
// back": the last trial of a plan made for a measured cost (Note [Measured plans]).
std::string last_trial(const nlohmann::json& st) {
  if (!st.contains("trials") || !st["trials"].is_array() || st["trials"].empty() || !st["trials"].back().is_object())
    return {};
  const auto& t = st["trials"].back();
  char ms[96];
  std::snprintf(ms, sizeof ms, " ran %.1f ms a step against %.1f ms: ", t.value("step_ms", 0.0),
                t.value("before_ms", 0.0));
  return "; a plan made for " + t.value("why", std::string("?")) + ms +
         (t.value("kept", true) ? std::string("it stayed")
                                : "the plan from iteration " + std::to_string(t.value("before_from", 0)) + " came back");
}

}  // namespace

std::string gpu_stats_line(const nlohmann::json& st) {
  const std::uint64_t budget = st.value("budget", std::uint64_t{0});
  std::string line = "GPU tier gpu" + std::to_string(st.value("device", 0)) + ": phase " +
                     st.value("phase", std::string("?")) + ", budget " + format_bytes(budget);
  if (st.value("mechanism", std::string()) == "storage" && st.contains("plan") && st["plan"].is_object())
    line += ", " + std::to_string(st["plan"].value("moves", 0)) + " saved storage(s) move in the plan" +
            // of which made by running their block again in backward (Note [Block recompute])
            (st["plan"].value("blocks_run", 0) > 0
                 ? " (" + std::to_string(st["plan"].value("blocks_run", 0)) + " block(s) run again for " +
                       format_bytes(st["plan"].value("bytes_by_block", std::uint64_t{0})) + ")"
                 : std::string()) +
            // the optimizer state a streamed step fetches and sends out itself (placer/saved_plan.cpp, Note
            // [Streamed step])
            (st["plan"].value("bytes_streamed", std::uint64_t{0}) > 0
                 ? ", the optimizer step streams " + format_bytes(st["plan"].value("bytes_streamed", std::uint64_t{0})) +
                       " of its state each way"
                 : std::string()) +
            (st["plan"].value("fits", true) ? "" : " (the plan does not fit the budget)") + measured_step(st["plan"]);
  else if (st.contains("plan") && st["plan"].is_object())
    line += ", " + std::to_string(st["plan"].value("groups", 0)) + " page group(s) in the plan";
  const auto its = st.value("iterations", nlohmann::json::array());
  if (!its.empty()) {
    const auto& last = its.back();
    line += "; iteration " + std::to_string(last.value("iteration", 0)) + ": " +
            format_bytes(last.value("bytes_to_host", std::uint64_t{0})) + " to host, " +
            format_bytes(last.value("bytes_to_device", std::uint64_t{0})) + " back, " +
            std::to_string(last.value("stalls", 0)) + " stall(s)";
    if (last.value("step_chunks", 0) > 0)  // (the last chunk is the optimizer's own step)
      line += ", the optimizer step in " + std::to_string(last.value("step_chunks", 0) + 1) + " chunks";
    // Storages let go and made again at their use instead of copied (Note [Recipes]).
    if (last.value("recomputed", 0) > 0)
      line += ", " + std::to_string(last.value("recomputed", 0)) + " storage(s) made again (" +
              format_bytes(last.value("bytes_recomputed", std::uint64_t{0})) + ")";
    // What making them again cost the GPU, measured in the plan's first iteration (Note [Measured
    // recomputation] in python/tierpack/measured_plans.py).
    if (st.contains("recomputations") && st["recomputations"].is_object()) {
      const auto& rc = st["recomputations"];
      char ms[96];
      std::snprintf(ms, sizeof ms, "%.1f ms of GPU time in iteration %d (predicted %.1f ms)",
                    rc.value("measured_ms", 0.0), rc.value("iteration", 0), rc.value("predicted_ms", 0.0));
      line += std::string(", making storages again took ") + ms;
    }
    // What the device held (PyTorch's reserved bytes) against the budget: Note [Reserved memory].
    if (last.contains("peak_reserved")) {
      const std::uint64_t held = last.value("peak_reserved", std::uint64_t{0});
      line += ", PyTorch's allocator held " + format_bytes(held) + " (" +
              format_bytes(last.value("peak_live", std::uint64_t{0})) + " live)" +
              (budget > 0 && held > budget ? ", OVER the budget" : "");
    }
  }
  // Where a plan's first iteration first passed its planned live peak (Note [Budget] in
  // python/tierpack/budget.py): [call, "pack"|"unpack", storage, bytes].
  if (st.contains("over_planned") && st["over_planned"].is_array() && !st["over_planned"].empty()) {
    const auto& w = st["over_planned"][0];
    if (w.is_array() && w.size() == 4 && w[0].is_number_integer() && w[1].is_string() && w[2].is_number_integer() &&
        w[3].is_number_unsigned())
      line += "; live bytes first passed the plan's peak after call " + std::to_string(w[0].get<std::int64_t>()) +
              " (" + w[1].get<std::string>() + " of storage " + std::to_string(w[2].get<std::int64_t>()) + ": " +
              format_bytes(w[3].get<std::uint64_t>()) + ")";
  }
  // Storages the program held past their release (Note [Held storages] in placer/saved_plan.cpp): index -> call.
  if (st.contains("held") && st["held"].is_object() && !st["held"].empty())
    line += "; " + std::to_string(st["held"].size()) +
            " storage(s) let go were held by the program until later calls (planned with)";
  if (st.contains("out_of_memory") && st["out_of_memory"].is_object()) {
    const auto& oom = st["out_of_memory"];
    line += "; out of memory in iteration " + std::to_string(oom.value("iteration", 0)) + " asking for " +
            format_bytes(oom.value("size", std::uint64_t{0})) + " (" +
            format_bytes(oom.value("free_mapped", std::uint64_t{0})) + " free in " +
            std::to_string(oom.value("gaps", 0)) + " gap(s) the allocator could not give back)";
  }
  line += last_trial(st);
  if (st.contains("verify"))
    line += "; " + std::to_string(st["verify"].value("rewrites", 0)) +
            " chunk(s) written behind the plan's back, copied again";
  if (!st.value("divergence", std::string()).empty()) line += "; fell back: " + st.value("divergence", std::string());
  return line;
}

}  // namespace tierpack
