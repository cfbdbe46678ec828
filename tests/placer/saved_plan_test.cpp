// The storage-move planner (placer/saved_plan.hpp, Note [Storage move plan]): hand-made traces with
// known answers, property tests over random transformer-like traces (never over the limit when the
// plan says it fits, nothing moved that the limit does not need, every move released after its copy
// started and fetched before its use, deterministic), the cost model and the JSON readers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "core/saved_trace.hpp"
#include "placer/saved_plan.hpp"

using namespace tierpack;
using namespace tierpack::placer;

namespace {

constexpr std::uint64_t MiB = 1 << 20;

SavedStorage stored(std::uint64_t bytes, bool movable) {
  SavedStorage s;
  s.bytes = bytes;
  s.movable = movable;
  return s;
}

// A forward of `layers` layers each saving one storage of `bytes` on top of `base` live bytes, then a
// backward using them in reverse order; `ms` of compute between calls. Live bytes grow in forward and
// shrink in backward as autograd frees what it used.
SavedTrace layered(int layers, std::uint64_t bytes, std::uint64_t base, double ms) {
  SavedTrace t;
  double now = 0;
  for (int i = 0; i < layers; ++i) {
    t.storages.push_back(stored(bytes, true));
    const std::uint64_t live = base + bytes * static_cast<std::uint64_t>(i + 1);
    t.events.push_back({SavedEventKind::pack, i, now, live, live});
    now += ms;
  }
  for (int i = layers - 1; i >= 0; --i) {
    const std::uint64_t live = base + bytes * static_cast<std::uint64_t>(i + 1);
    t.events.push_back({SavedEventKind::unpack, i, now, live, live});
    now += ms;
  }
  t.optimizer_ms = ms;
  t.step_ms = now + ms;
  return t;
}

SavedPlanOptions options(std::uint64_t limit) {
  SavedPlanOptions o;
  o.limit_bytes = limit;
  o.d2h_bytes_per_s = 50e9;
  o.h2d_bytes_per_s = 50e9;
  return o;
}

// What the device holds from call i to the next without moves: its recorded window, or at a streamed step's calls
// its live bytes and the step's window of state (Note [Streamed step]).
std::uint64_t window_of(const SavedTrace& t, const SavedPlanOptions& o, std::size_t i) {
  const SavedEvent& e = t.events[i];
  if (o.stream_window_bytes == 0 || e.kind != SavedEventKind::unpack ||
      !t.storages[static_cast<std::size_t>(e.storage)].optimizer_state)
    return e.window_peak;
  std::uint64_t state = 0;
  for (const SavedStorage& s : t.storages) state += s.optimizer_state ? s.bytes : 0;
  return e.live + std::min(state, o.stream_window_bytes);
}

// Note [Block run memory]: what each block run again adds at the call where it runs (its extra bytes and the
// largest member it does not hand back: one copied out or made by its recipe), at each call.
std::vector<std::uint64_t> block_runs(const SavedTrace& t, const SavedPlan& p) {
  std::vector<std::int32_t> run_at(t.blocks.size(), -1);
  std::vector<std::uint64_t> again(t.blocks.size(), 0);
  for (const SavedMove& m : p.moves) {
    const SavedStorage& st = t.storages[static_cast<std::size_t>(m.storage)];
    if (st.block < 0) continue;
    if (m.by_block) run_at[static_cast<std::size_t>(st.block)] = m.fetch_at;
    else again[static_cast<std::size_t>(st.block)] = std::max(again[static_cast<std::size_t>(st.block)], st.bytes);
  }
  std::vector<std::uint64_t> extra(t.events.size(), 0);
  for (std::size_t b = 0; b < t.blocks.size(); ++b)
    if (run_at[b] >= 0) extra[static_cast<std::size_t>(run_at[b])] += t.blocks[b].extra_bytes + again[b];
  return extra;
}

// Note [Streamed step]: `states` optimizer states of `state` bytes packed first on `base` live bytes, four
// activations of `act` bytes saved in forward (a call each, 1 ms apart) and used in reverse in backward, each use
// making `grad` bytes of gradients; then the step's calls, `gap` ms apart, use the states in order, its last
// window `temp` over the live bytes (a whole step's temporaries). 2 ms of optimizer step.
SavedTrace stepped(std::uint64_t base, int states, std::uint64_t state, std::uint64_t act, std::uint64_t grad,
                   std::uint64_t temp, double gap) {
  SavedTrace t;
  std::uint64_t live = base + static_cast<std::uint64_t>(states) * state;
  double now = 0;
  for (int k = 0; k < states; ++k) {
    t.storages.push_back(stored(state, true));
    t.storages.back().optimizer_state = true;
    t.events.push_back({SavedEventKind::pack, k, now, live, live});
  }
  for (int k = 0; k < 4; ++k) {
    t.storages.push_back(stored(act, true));
    live += act;
    t.events.push_back({SavedEventKind::pack, states + k, now += 1.0, live, live});
  }
  for (int k = 3; k >= 0; --k) {
    t.events.push_back({SavedEventKind::unpack, states + k, now += 1.0, live, live});
    live = live - act + grad;
  }
  for (int k = 0; k < states; ++k)
    t.events.push_back({SavedEventKind::unpack, k, now += gap, live, k + 1 == states ? live + temp : live});
  t.optimizer_ms = 2.0;
  t.step_ms = now + t.optimizer_ms;
  return t;
}

// Live bytes at every call with the plan's moves (what the runtime would see).
std::uint64_t replayed_peak(const SavedTrace& t, const SavedPlan& p, const SavedPlanOptions& o = SavedPlanOptions{}) {
  std::uint64_t peak = 0;
  const std::vector<std::uint64_t> extra = block_runs(t, p);
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    std::uint64_t absent = 0;
    const auto at = static_cast<std::int32_t>(i);
    for (const SavedMove& m : p.moves) {
      const std::int32_t back = m.fetch_at >= 0 ? m.fetch_at : static_cast<std::int32_t>(t.events.size());
      if (m.release_at <= at && at < back) absent += t.storages[static_cast<std::size_t>(m.storage)].bytes;
    }
    const std::uint64_t window = window_of(t, o, i) + extra[i];
    peak = std::max(peak, window - std::min(window, absent));
  }
  return peak;
}

}  // namespace

TEST(SavedPlan, NothingMovesWhenTheIterationFits) {
  const SavedTrace t = layered(8, 64 * MiB, 256 * MiB, 1.0);
  const SavedPlan p = plan_saved_tensors(t, options(1024 * MiB));
  EXPECT_TRUE(p.fits);
  EXPECT_TRUE(p.moves.empty());
  EXPECT_EQ(p.bytes_out, 0u);
  EXPECT_EQ(p.bytes_needed, 0u);
  EXPECT_DOUBLE_EQ(p.predicted_ms, t.step_ms);
  EXPECT_DOUBLE_EQ(p.bound_ms, t.step_ms);
}

TEST(SavedPlan, MovesTheEarliestSavedStoragesAndOnlyWhatTheLimitNeeds) {
  // Peak 256 + 8 x 64 = 768 MiB; limit 640: 128 MiB must be away at the peak: the first two storages.
  const SavedTrace t = layered(8, 64 * MiB, 256 * MiB, 1.0);
  const SavedPlan p = plan_saved_tensors(t, options(640 * MiB));
  ASSERT_TRUE(p.fits);
  ASSERT_EQ(p.moves.size(), 2u);
  EXPECT_EQ(p.moves[0].storage, 0);
  EXPECT_EQ(p.moves[1].storage, 1);
  EXPECT_EQ(p.bytes_needed, 128 * MiB);
  EXPECT_EQ(p.bytes_out, 128 * MiB);
  EXPECT_EQ(p.bytes_in, 128 * MiB);
  // Let go as late as the limit allows: at the packs that would cross it (live 704 and 768 MiB).
  EXPECT_EQ(p.moves[0].release_at, 6);
  EXPECT_EQ(p.moves[1].release_at, 7);
  // Back as soon as backward has room: storage 1 (used first) once storage 7 was used (call 9, live
  // 704 - 128 + 64 = 640 MiB), storage 0 one call later.
  EXPECT_EQ(p.moves[1].fetch_at, 9);
  EXPECT_EQ(p.moves[0].fetch_at, 10);
  EXPECT_EQ(p.moves[1].use_at, 14);
  EXPECT_EQ(p.moves[0].use_at, 15);
  EXPECT_LE(replayed_peak(t, p), 640 * MiB);
  EXPECT_EQ(p.planned_peak, replayed_peak(t, p));
}

TEST(SavedPlan, DoesNotFitWhenNothingMovableIsLeft) {
  SavedTrace t = layered(4, 64 * MiB, 256 * MiB, 1.0);
  for (auto& s : t.storages) s.movable = false;
  const SavedPlan p = plan_saved_tensors(t, options(400 * MiB));
  EXPECT_FALSE(p.fits);
  EXPECT_EQ(p.over_at, 2);  // live 256 + 3 x 64 = 448 MiB
  EXPECT_TRUE(p.moves.empty());
}

TEST(SavedPlan, NeverMovesSmallStoragesOrOnesSavedInBackward) {
  SavedTrace t = layered(4, 64 * MiB, 256 * MiB, 1.0);
  t.storages[0].bytes = MiB / 2;  // under min_bytes
  // A storage packed during backward (a reentrant checkpoint's recomputation) and used right after.
  t.storages.push_back(stored(512 * MiB, true));
  const std::int32_t s = static_cast<std::int32_t>(t.storages.size() - 1);
  const double end = t.events.back().t_ms;
  t.events.push_back({SavedEventKind::pack, s, end, 900 * MiB, 900 * MiB});
  t.events.push_back({SavedEventKind::unpack, s, end, 900 * MiB, 900 * MiB});
  const SavedPlan p = plan_saved_tensors(t, options(300 * MiB));
  for (const SavedMove& m : p.moves) {
    EXPECT_NE(m.storage, 0);
    EXPECT_NE(m.storage, s);
  }
}

TEST(SavedPlan, AStorageHeldUntilForwardEndsIsLetGoNoEarlierThanBackward) {
  // Storages 0 and 1 are autocast's casts of parameters: its cache holds them until forward ends, so
  // letting them go in forward would free nothing. Belady would pick them first (used last).
  SavedTrace t = layered(4, 64 * MiB, 256 * MiB, 1.0);
  t.storages[0].held_in_forward = t.storages[1].held_in_forward = true;
  const std::int32_t backward = 4;  // the first unpack
  const SavedPlan p = plan_saved_tensors(t, options(450 * MiB));  // at the pack of 3: one storage must go
  ASSERT_TRUE(p.fits);
  ASSERT_FALSE(p.moves.empty());
  EXPECT_EQ(p.moves.front().storage, 2);  // the one not held, although used before 0 and 1
  for (const SavedMove& m : p.moves)
    if (m.storage < 2) {
      EXPECT_GE(m.release_at, backward) << "storage " << m.storage;
    }
  // At the pack of 2 (448 MiB live) one must go and both packed before it are held: it does not fit there.
  const SavedPlan q = plan_saved_tensors(t, options(400 * MiB));
  EXPECT_FALSE(q.fits);
  EXPECT_EQ(q.over_at, 2);
  // Not held, the same limit fits by letting 0 and 1 go in forward.
  SavedTrace free_ = t;
  free_.storages[0].held_in_forward = free_.storages[1].held_in_forward = false;
  EXPECT_TRUE(plan_saved_tensors(free_, options(400 * MiB)).fits);
  // The field travels through JSON, and is optional.
  EXPECT_EQ(saved_trace_from_json(saved_trace_to_json(t)), t);
  EXPECT_EQ(saved_trace_to_json(free_).find("held_in_forward"), std::string::npos);
}

TEST(SavedPlan, AStreamedStepFetchesTheOptimizerStateItselfAndHoldsOnlyItsWindow) {
  // Note [Streamed step]: 256 MiB of parameters and gradients, two 256 MiB optimizer states packed at the first
  // call and used by the step (the last calls), four 64 MiB activations. At the step the states alone are 512 MiB.
  const std::uint64_t state = 256 * MiB;
  const SavedTrace t = stepped(256 * MiB, 2, state, 64 * MiB, 0, 0, 0.5);
  SavedPlanOptions o = options(600 * MiB);
  const SavedPlan whole = plan_saved_tensors(t, o);
  EXPECT_FALSE(whole.fits);  // the step needs 768 MiB
  o.stream_window_bytes = 128 * MiB;
  const SavedPlan p = plan_saved_tensors(t, o);
  ASSERT_TRUE(p.fits) << p.planned_peak;
  EXPECT_LE(p.planned_peak, 600 * MiB);
  std::uint64_t states_out = 0;
  for (const SavedMove& m : p.moves)
    if (m.storage < 2) {
      EXPECT_EQ(m.fetch_at, -1) << "the step fetches state " << m.storage << ", not the plan";
      EXPECT_EQ(m.use_at, -1);
      states_out += state;
    }
  EXPECT_EQ(states_out, 2 * state);  // both must be away: with one back the step would hold 640 MiB
  EXPECT_GE(p.bytes_in, states_out);  // they cross back during the step
  // Each way 512 MiB at 50 GB/s (10.7 ms) while the step computes for 2 ms: the step waits for the rest.
  const double link_ms = static_cast<double>(2 * state) / 50e9 * 1e3;
  EXPECT_GE(p.predicted_ms, t.step_ms + link_ms - t.optimizer_ms - 1e-6);
  // Both ways at once at 80 GB/s together (not 100): the step waits for 1 GiB at that rate.
  o.both_ways_bytes_per_s = 80e9;
  const SavedPlan shared = plan_saved_tensors(t, o);
  const double both_ms = static_cast<double>(4 * state) / 80e9 * 1e3;
  EXPECT_NEAR(shared.predicted_ms - p.predicted_ms, both_ms - link_ms, 1e-6);
  EXPECT_EQ(shared.bytes_in, p.bytes_in);  // the same moves
  // The option and the field travel through JSON.
  EXPECT_EQ(saved_trace_from_json(saved_trace_to_json(t)), t);
  EXPECT_EQ(saved_plan_options_from_json("{\"limit_bytes\":1,\"d2h_bytes_per_s\":1,\"h2d_bytes_per_s\":1,"
                                         "\"stream_window_bytes\":134217728}").stream_window_bytes,
            128 * MiB);
  EXPECT_EQ(saved_plan_options_from_json("{\"limit_bytes\":1,\"d2h_bytes_per_s\":1,\"h2d_bytes_per_s\":1,"
                                         "\"both_ways_bytes_per_s\":9.6e10}").both_ways_bytes_per_s,
            9.6e10);
}

TEST(SavedPlan, AStreamedStepFindsBackBeforeTheStepWhatFitsThereAndStreamsTheRest) {
  // Note [Streamed step]: 128 MiB of parameters, three 128 MiB optimizer states packed first, four 64 MiB
  // activations; backward frees the activations and makes 128 MiB of gradients; the step updates the states (calls
  // 11-13) and its recorded window holds 384 MiB of a whole step's temporaries. Limit 580 MiB, window 64 MiB: the
  // step cannot hold all the state (640 MiB live there), nor two states beside the window, but one fits from call 9
  // on: it comes back in backward and stays through the step; the other state let go is the step's to fetch.
  const std::uint64_t state = 128 * MiB;
  const SavedTrace t = stepped(128 * MiB, 3, state, 64 * MiB, 32 * MiB, 3 * state, 0.1);
  SavedPlanOptions o = options(580 * MiB);
  o.stream_window_bytes = 64 * MiB;
  const SavedPlan p = plan_saved_tensors(t, o);
  ASSERT_TRUE(p.fits) << p.planned_peak;
  EXPECT_LE(p.planned_peak, 580 * MiB);
  std::vector<const SavedMove*> of(3, nullptr);
  for (const SavedMove& m : p.moves)
    if (m.storage < 3) of[static_cast<std::size_t>(m.storage)] = &m;
  ASSERT_TRUE(of[0] && of[1]) << "two states must be away at the activations' peak";
  EXPECT_EQ(of[2], nullptr) << "the third stays: nothing needs its room";
  EXPECT_GT(of[0]->release_at, 0) << "let go after its copy out started: it stays through the step";
  EXPECT_EQ(of[0]->fetch_at, 9) << "back in backward, from where it fits to the iteration's end";
  EXPECT_EQ(of[0]->use_at, 11);
  EXPECT_EQ(of[1]->fetch_at, -1) << "the step fetches it";
  EXPECT_EQ(p.bytes_in, 2 * state);
  // One state crosses in the step (128 MiB each way at 50 GB/s, 2.7 ms, while it computes 2 ms), not two.
  const double both_ms = static_cast<double>(2 * state) / 50e9 * 1e3;
  EXPECT_LT(p.predicted_ms, t.step_ms + both_ms - t.optimizer_ms);
  // What the device holds with these moves, at every call: the step's calls hold their live bytes and the window.
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    std::uint64_t held = i >= 11 ? t.events[i].live + o.stream_window_bytes : t.events[i].window_peak;
    for (const SavedMove& m : p.moves) {
      const auto at = static_cast<std::int32_t>(i);
      if (m.release_at <= at && (m.fetch_at < 0 || at < m.fetch_at))
        held -= t.storages[static_cast<std::size_t>(m.storage)].bytes;
    }
    EXPECT_LE(held, 580 * MiB) << "call " << i;
  }
}

TEST(SavedPlan, AStorageTheProgramHoldsIsLetGoNoEarlierThanTheCallThatFreesIt) {
  // Note [Held storages]: storage 0 (used last, Belady's first pick) is held by the program until call 3 (a
  // residual connection's input): let go at the pack of 2 it would free nothing there.
  SavedTrace t = layered(4, 64 * MiB, 256 * MiB, 1.0);
  const SavedPlan before = plan_saved_tensors(t, options(400 * MiB));
  ASSERT_TRUE(before.fits);
  ASSERT_FALSE(before.moves.empty());
  EXPECT_EQ(before.moves.front().storage, 0);
  EXPECT_EQ(before.moves.front().release_at, 2);
  t.storages[0].held_until = 3;
  const SavedPlan p = plan_saved_tensors(t, options(400 * MiB));
  ASSERT_TRUE(p.fits);
  for (const SavedMove& m : p.moves)
    if (m.storage == 0) {
      EXPECT_GE(m.release_at, 3);
    }
  const auto first = std::min_element(p.moves.begin(), p.moves.end(),
                                      [](const SavedMove& a, const SavedMove& b) { return a.release_at < b.release_at; });
  EXPECT_EQ(first->storage, 1);  // the next used last goes at the pack of 2 instead
  EXPECT_EQ(first->release_at, 2);
  // Held to the iteration's end: never let go; with 0 and 1 held nothing can go at the pack of 2.
  t.storages[0].held_until = static_cast<std::int32_t>(t.events.size());
  for (const SavedMove& m : plan_saved_tensors(t, options(400 * MiB)).moves) EXPECT_NE(m.storage, 0);
  t.storages[1].held_until = 3;
  const SavedPlan q = plan_saved_tensors(t, options(400 * MiB));
  EXPECT_FALSE(q.fits);
  EXPECT_EQ(q.over_at, 2);
  // The field travels through JSON, is optional, and the reader checks its range.
  EXPECT_EQ(saved_trace_from_json(saved_trace_to_json(t)), t);
  t.storages[0].held_until = static_cast<std::int32_t>(t.events.size()) + 1;
  try {
    saved_trace_from_json(saved_trace_to_json(t));
    ADD_FAILURE() << "a held_until past the iteration's calls was accepted";
  } catch (const format_error& e) {
    EXPECT_NE(std::string(e.what()).find("storage 0: field 'held_until' = 9 is out of range (8 events)"), std::string::npos)
        << e.what();
  }
  t.storages[0].held_until = t.storages[1].held_until = -1;
  EXPECT_EQ(saved_trace_to_json(t).find("held_until"), std::string::npos);
}

TEST(SavedPlan, PredictsTheStallOfACopyOutThatIsNotDoneWhenItsMemoryIsNeeded) {
  // 1 GiB storages, 1 ms apart, 50 GB/s: a copy out takes 21.5 ms, so letting go of storage 0 at the
  // pack that crosses the limit waits for most of it.
  const SavedTrace t = layered(4, 1024 * MiB, 0, 1.0);
  const SavedPlan p = plan_saved_tensors(t, options(3 * 1024 * MiB));
  ASSERT_EQ(p.moves.size(), 1u);
  const double copy = 1024.0 * MiB / 50e9 * 1e3;
  // Released at the last pack (t = 3 ms): compute waits copy - 3 ms. Fetched at call 5 (the first
  // with room), where compute is at copy + 2 ms; back at 2 copy + 2, used at call 7 (copy + 4): waits
  // copy - 2 more.
  EXPECT_EQ(p.moves[0].release_at, 3);
  EXPECT_EQ(p.moves[0].fetch_at, 5);
  EXPECT_NEAR(p.stall_ms, 2 * copy - 5.0, 1e-9);
  EXPECT_NEAR(p.predicted_ms, t.step_ms + 2 * copy - 5.0, 1e-9);
  EXPECT_GE(p.predicted_ms, p.bound_ms - 1e-9);
}

TEST(SavedPlan, TheBoundIsNeverAboveThePredictionOfAnyPlan) {
  for (std::uint64_t limit : {200ull, 300ull, 400ull, 500ull, 600ull}) {
    const SavedTrace t = layered(12, 48 * MiB, 64 * MiB, 0.7);
    const SavedPlan p = plan_saved_tensors(t, options(limit * MiB));
    if (!p.fits) continue;
    EXPECT_LE(p.bound_ms, p.predicted_ms + 1e-9) << limit;
    EXPECT_GE(p.bound_ms, t.step_ms);
  }
}

// Random transformer-like iterations: layers saving several storages of mixed sizes (some shared by two
// packs, as views are), a few tiny and unmovable ones, temporaries that raise a window above the live
// bytes, and a backward that frees as it goes.
TEST(SavedPlan, PropertiesHoldOnRandomTraces) {
  std::uint64_t seed = 0x9e3779b97f4a7c15ull;
  auto next = [&seed] {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
  };
  const int cases =
      std::getenv("TIERPACK_PROPERTY_CASES") ? std::max(1, std::atoi(std::getenv("TIERPACK_PROPERTY_CASES"))) : 500;
  int block_moves = 0, block_inputs_copied = 0, state_fetched = 0, state_streamed = 0;
  for (int c = 0; c < cases; ++c) {
    SavedTrace t;
    const std::uint64_t base = (next() % 512) * MiB;
    std::uint64_t live = base;
    double now = 0;
    std::vector<std::int32_t> order;
    // Note [Streamed step]: optimizer state packed first and used by a streamed step at the end
    const int states = c % 5 == 4 ? 1 + static_cast<int>(next() % 3) : 0;
    for (int k = 0; k < states; ++k) {
      t.storages.push_back(stored((1 + next() % 128) * MiB, true));
      t.storages.back().optimizer_state = true;
      live += t.storages.back().bytes;
      t.events.push_back({SavedEventKind::pack, k, now, live, live});
    }
    const int layers = 1 + static_cast<int>(next() % 12);
    for (int l = 0; l < layers; ++l) {
      const int per = 1 + static_cast<int>(next() % 4);
      for (int k = 0; k < per; ++k) {
        const std::uint64_t bytes = (next() % 4 == 0 ? MiB / 4 : (1 + next() % 128) * MiB);
        t.storages.push_back(stored(bytes, next() % 10 != 0));
        const auto s = static_cast<std::int32_t>(t.storages.size() - 1);
        if (c % 2 == 1 && s > 0 && next() % 3 == 0) {  // a recipe from one or two earlier storages (chains too)
          SavedStorage& st = t.storages.back();
          st.recompute_ms = 0.001 * static_cast<double>(next() % 100);
          st.recompute_from.push_back(static_cast<std::int32_t>(next() % static_cast<std::uint64_t>(s)));
          if (next() % 4 == 0) st.recompute_from.push_back(static_cast<std::int32_t>(next() % static_cast<std::uint64_t>(s)));
        }
        if (c % 2 == 1 && next() % 8 == 0) t.storages.back().held_in_forward = true;
        if (next() % 9 == 0) t.storages.back().held_until = static_cast<std::int32_t>(t.events.size() + next() % 6);
        if (c % 4 >= 2 && k > 0) t.storages.back().block = l;  // Note [Block recompute]: the layer's first is its input
        live += bytes;
        const std::uint64_t temp = next() % 3 == 0 ? (next() % 64) * MiB : 0;
        t.events.push_back({SavedEventKind::pack, s, now, live, live + temp});
        now += 0.01 * static_cast<double>(next() % 200);
        order.push_back(s);
        if (next() % 5 == 0) {  // a view of the same storage saved again
          t.events.push_back({SavedEventKind::pack, s, now, live, live});
          order.push_back(s);
        }
      }
    }
    std::vector<bool> freed(t.storages.size(), false);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const std::uint64_t temp = next() % 3 == 0 ? (next() % 64) * MiB : 0;
      t.events.push_back({SavedEventKind::unpack, *it, now, live, live + temp});
      now += 0.01 * static_cast<double>(next() % 200);
      if (!freed[static_cast<std::size_t>(*it)]) {  // freed after its (last) use, approximately
        freed[static_cast<std::size_t>(*it)] = true;
        live -= t.storages[static_cast<std::size_t>(*it)].bytes;
      }
    }
    for (int k = 0; k < states; ++k) {
      const std::uint64_t temp = (next() % 256) * MiB;  // a whole step's temporaries, which a streamed one has not
      t.events.push_back({SavedEventKind::unpack, k, now, live, live + temp});
      now += 0.01 * static_cast<double>(next() % 50);
    }
    if (c % 4 >= 2) {  // blocks: one per layer, read from the layer's first storage (some runs dear, some cheap)
      std::vector<std::int32_t> first(static_cast<std::size_t>(layers), -1);
      for (std::size_t s = 0; s < t.storages.size(); ++s)
        if (t.storages[s].block < 0 && s + 1 < t.storages.size() && t.storages[s + 1].block >= 0)
          first[static_cast<std::size_t>(t.storages[s + 1].block)] = static_cast<std::int32_t>(s);
      for (int l = 0; l < layers; ++l) {
        SavedBlock b;
        b.ms = 0.01 * static_cast<double>(next() % 300);
        if (next() % 2 == 0) b.extra_bytes = (next() % 64) * MiB;  // Note [Block run memory]
        if (first[static_cast<std::size_t>(l)] >= 0) b.from.push_back(first[static_cast<std::size_t>(l)]);
        t.blocks.push_back(b);
      }
    }
    for (SavedStorage& st : t.storages)  // (held to the iteration's end at most)
      st.held_until = std::min(st.held_until, static_cast<std::int32_t>(t.events.size()));
    t.optimizer_ms = 1.0;
    t.step_ms = now + 1.0;
    std::uint64_t peak = 0;
    for (const auto& e : t.events) peak = std::max(peak, e.window_peak);
    const std::uint64_t limit = peak * (30 + next() % 80) / 100;
    SavedPlanOptions o = options(limit);
    if (states > 0) o.stream_window_bytes = (1 + next() % 64) * MiB;
    const SavedPlan p = plan_saved_tensors(t, o);
    SCOPED_TRACE("case " + std::to_string(c) + ": limit " + std::to_string(limit / MiB) + " MiB of peak " +
                 std::to_string(peak / MiB));
    // Never over the limit when it says it fits; its planned peak is what replaying it gives.
    EXPECT_EQ(p.planned_peak, replayed_peak(t, p, o));
    if (p.fits) {
      EXPECT_LE(p.planned_peak, limit);
    }
    if (!t.blocks.empty()) {  // ... nor blocks a step that the recipes alone would give (Note [Block recompute])
      SavedTrace no_blocks = t;
      no_blocks.blocks.clear();
      for (SavedStorage& st : no_blocks.storages) st.block = -1;
      const SavedPlan without = plan_saved_tensors(no_blocks, o);
      if (without.fits) {
        EXPECT_TRUE(p.fits);
        EXPECT_LE(p.predicted_ms, without.predicted_ms) << "the recipes alone are predicted faster";
      }
    }
    // Making storages again never costs a fit that copies alone would find (Note [Recompute]).
    SavedPlanOptions copies_only = o;
    copies_only.recompute = false;
    const SavedPlan copied = plan_saved_tensors(t, copies_only);
    if (copied.fits) {
      EXPECT_TRUE(p.fits) << "copies alone fit";
      // ... nor a step: the cost model chooses (Note [Recompute cost]).
      EXPECT_LE(p.predicted_ms, copied.predicted_ms) << "copies alone are predicted faster";
    }
    if (limit >= peak) {
      EXPECT_TRUE(p.moves.empty());
    }
    // Nothing moves that the limit does not need: without its latest-released move the plan would be
    // over the limit at that release (each release was forced by a window).
    std::uint64_t out = 0, remade = 0;
    std::int32_t backward = 0;
    while (backward < static_cast<std::int32_t>(t.events.size()) &&
           t.events[static_cast<std::size_t>(backward)].kind == SavedEventKind::pack)
      ++backward;
    const std::vector<std::uint64_t> runs = block_runs(t, p);
    std::vector<const SavedMove*> move_of(t.storages.size(), nullptr);
    for (const SavedMove& m : p.moves) move_of[static_cast<std::size_t>(m.storage)] = &m;
    for (const SavedMove& m : p.moves) {
      const SavedStorage& s = t.storages[static_cast<std::size_t>(m.storage)];
      if (s.held_in_forward) {
        EXPECT_GE(m.release_at, backward) << "a storage autocast holds let go in forward";
      }
      EXPECT_GE(m.release_at, s.held_until) << "a storage the program holds let go before it is freed";
      block_moves += m.by_block ? 1 : 0;
      if (m.by_block) {  // Note [Block recompute]: one run makes the block's members, from inputs on the device
        ASSERT_GE(s.block, 0);
        const SavedBlock& b = t.blocks[static_cast<std::size_t>(s.block)];
        for (std::int32_t in : b.from) {  // made no later, or copied back by then (Note [Block inputs])
          const SavedMove* im = move_of[static_cast<std::size_t>(in)];
          if (im == nullptr || im->release_at >= m.fetch_at) continue;
          EXPECT_GE(im->fetch_at, 0) << "block " << s.block << " reads " << in << ", never back";
          EXPECT_LE(im->fetch_at, m.fetch_at) << "block " << s.block << " runs before its input " << in << " is back";
          if (!im->recompute) {
            EXPECT_LE(im->use_at, m.fetch_at) << "the copy of " << in << " is not waited for where block "
                                              << s.block << " runs";
            const auto first_use = std::find_if(t.events.begin(), t.events.end(), [&](const SavedEvent& e) {
              return e.kind == SavedEventKind::unpack && e.storage == in;
            });
            EXPECT_TRUE(first_use == t.events.end() || first_use - t.events.begin() >= m.fetch_at)
                << "input " << in << " copied out, used up before block " << s.block << " runs";
            ++block_inputs_copied;
          }
        }
        for (const SavedMove& other : p.moves)
          if (other.by_block && t.storages[static_cast<std::size_t>(other.storage)].block == s.block) {
            EXPECT_EQ(other.fetch_at, m.fetch_at) << "block " << s.block << " runs twice";
          }
      } else if (m.recompute) {  // what it is made from is on the device when it is made: kept, or made no later
        EXPECT_GE(s.recompute_ms, 0);
        for (std::int32_t in : s.recompute_from) {
          const SavedMove* im = move_of[static_cast<std::size_t>(in)];
          if (im == nullptr || im->release_at >= m.fetch_at) continue;
          EXPECT_TRUE(im->recompute) << "storage " << m.storage << " is made from " << in << ", copied out";
          EXPECT_LE(im->fetch_at, m.fetch_at) << "storage " << m.storage << " is made before its input " << in;
        }
      }
      EXPECT_TRUE(s.movable);
      EXPECT_GE(s.bytes, o.min_bytes);
      // (a streamed step's state fetched by the step starts the iteration away: it may be let go at its pack)
      const bool streamed = s.optimizer_state && m.fetch_at < 0;
      (streamed ? state_streamed : state_fetched) += s.optimizer_state ? 1 : 0;
      if (streamed) {
        EXPECT_LE(m.copy_at, m.release_at);
      } else {
        EXPECT_LT(m.copy_at, m.release_at);
      }
      const std::int32_t until = m.use_at < 0 ? static_cast<std::int32_t>(t.events.size()) : m.use_at;
      for (std::int32_t i = m.release_at + (streamed ? 1 : 0); i < until; ++i)
        EXPECT_FALSE(t.events[static_cast<std::size_t>(i)].storage == m.storage &&
                     t.events[static_cast<std::size_t>(i)].kind == SavedEventKind::pack)
            << "storage " << m.storage << " let go at " << m.release_at << " before its pack at " << i;
      EXPECT_EQ(t.events[static_cast<std::size_t>(m.copy_at)].kind, SavedEventKind::pack);
      if (m.use_at >= 0) {
        EXPECT_GT(m.fetch_at, m.release_at);
        EXPECT_LE(m.fetch_at, m.use_at);
        // its first use, or (a copy) the run of a block that reads it (Note [Block inputs])
        const SavedEvent& u = t.events[static_cast<std::size_t>(m.use_at)];
        bool block_run = false;
        for (const SavedMove& other : p.moves)
          if (other.by_block && other.fetch_at == m.use_at) {
            const auto& from = t.blocks[static_cast<std::size_t>(t.storages[static_cast<std::size_t>(other.storage)].block)].from;
            block_run = block_run || std::find(from.begin(), from.end(), m.storage) != from.end();
          }
        EXPECT_EQ(u.kind, SavedEventKind::unpack);
        EXPECT_TRUE(u.storage == m.storage || (!m.recompute && block_run))
            << "storage " << m.storage << " is waited for at call " << m.use_at << ", neither its use nor a block's run";
      }
      EXPECT_LT(m.release_at, m.use_at < 0 ? static_cast<std::int32_t>(t.events.size()) : m.use_at);
      (m.recompute ? remade : out) += s.bytes;
      const auto r = static_cast<std::size_t>(m.release_at);
      EXPECT_GT(window_of(t, o, r) + runs[r], limit) << "a release at a call whose window fits";
    }
    EXPECT_EQ(out, p.bytes_out);
    EXPECT_EQ(remade, p.bytes_recomputed);
    if (p.fits) {
      EXPECT_GE(out + remade, p.bytes_needed);
    }
    EXPECT_GE(p.predicted_ms, t.step_ms);
    if (p.fits && states == 0) {  // a plan that moves what the limit needs is never faster than the bound
      EXPECT_LE(p.bound_ms, p.predicted_ms + 1e-9);
    }
    EXPECT_EQ(p, plan_saved_tensors(t, o)) << "not deterministic";
    // The JSON round trip keeps every value.
    EXPECT_EQ(saved_trace_from_json(saved_trace_to_json(t)), t);
    const SavedPlan back = saved_plan_from_json(saved_plan_to_json(p));
    EXPECT_EQ(back.moves, p.moves);
    EXPECT_EQ(back.bytes_out, p.bytes_out);
    EXPECT_EQ(back.fits, p.fits);
  }
  if (cases >= 100) {
    EXPECT_GT(block_moves, 0) << "no random trace ran a block again";
    EXPECT_GT(block_inputs_copied, 0) << "no random trace copied a block's input out (Note [Block inputs])";
    EXPECT_GT(state_fetched, 0) << "no random trace fetched optimizer state before a streamed step";
    EXPECT_GT(state_streamed, 0) << "no random trace left optimizer state to a streamed step";
  }
}

TEST(SavedTraceJson, ReadersNameTheFieldThatIsWrong) {
  const SavedTrace t = layered(2, 64 * MiB, 0, 1.0);
  std::string good = saved_trace_to_json(t);
  EXPECT_EQ(saved_trace_from_json(good), t);
  auto error_of = [](const std::string& text) {
    try {
      saved_trace_from_json(text);
    } catch (const format_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  auto with = [&good](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    if (at == std::string::npos) return std::string("pattern not found: ") + from;
    return s.replace(at, from.size(), to);
  };
  EXPECT_NE(error_of(with("\"bytes\":67108864", "\"bytes\":9223372036854775807")).find("storage 0: field 'bytes'"),
            std::string::npos);
  EXPECT_NE(error_of(with("\"bytes\":67108864", "\"bytes\":-1")).find("field 'bytes'"), std::string::npos);
  EXPECT_NE(error_of(with("\"storage\":1", "\"storage\":7")).find("field 'storage' = 7 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of(with("\"kind\":\"pack\"", "\"kind\":\"push\"")).find("field 'kind'"), std::string::npos);
  EXPECT_NE(error_of(with("\"step_ms\":", "\"step_ms\":-")).find("field 'step_ms'"), std::string::npos);
  EXPECT_NE(error_of("[1,2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of("{").find("not JSON"), std::string::npos);
  EXPECT_NE(
      error_of("{\"step_ms\":1,\"optimizer_ms\":0,\"context_bytes\":0,\"storages\":[]}").find("missing field 'events'"),
      std::string::npos);
  EXPECT_THROW(saved_plan_options_from_json("{\"limit_bytes\":1,\"d2h_bytes_per_s\":0,\"h2d_bytes_per_s\":1}"),
               format_error);
  EXPECT_THROW(saved_plan_options_from_json("{\"limit_bytes\":\"1G\",\"d2h_bytes_per_s\":1,\"h2d_bytes_per_s\":1}"),
               format_error);
}

// Note [Two-way transfer bound], by hand: 1 GB over a 2 GB limit from the pack (0 ms) to the unpack
// (10 ms), a 22 ms step with a 2 ms optimizer step, 50 GB/s each way (20 ms a copy). Out before the
// peak and back after it: min over tau of max(2 + tau, 20) + max(22 - tau, 20) - 2 = 38 ms (tau in
// [2, 18]); the device-to-host direction alone gives 22 + (20 - (2 + 10)) = 30 ms.
TEST(SavedPlan, TransferBoundCountsBothDirections) {
  SavedTrace t;
  t.storages.push_back(stored(1'000'000'000, true));
  t.events.push_back({SavedEventKind::pack, 0, 0.0, 3'000'000'000, 3'000'000'000});
  t.events.push_back({SavedEventKind::unpack, 0, 10.0, 3'000'000'000, 3'000'000'000});
  t.step_ms = 22;
  t.optimizer_ms = 2;
  EXPECT_NEAR(saved_transfer_bound_ms(t, 2'000'000'000, 50e9, 50e9), 38.0, 1e-9);
  // Twice the bandwidth back: the copy back (10 ms) fits after the peak; out still needs 20 ms before it.
  EXPECT_NEAR(saved_transfer_bound_ms(t, 2'000'000'000, 50e9, 100e9), 30.0, 1e-9);
  EXPECT_NEAR(saved_transfer_bound_ms(t, 3'000'000'000, 50e9, 50e9), 22.0, 1e-9);  // nothing over the limit
  EXPECT_THROW(saved_transfer_bound_ms(t, 2'000'000'000, 50e9, 0.0), logic_error);
}

// Note [Recompute]: a transformer-like forward where every second storage is an activation's output that
// the runtime can make again from the storage before it (its input, kept for the activation's backward).
namespace {
SavedTrace with_recipes(int layers, double recompute_ms) {
  SavedTrace t = layered(layers, 64 * MiB, 256 * MiB, 1.0);
  for (std::size_t s = 1; s < t.storages.size(); s += 2) {
    t.storages[s].recompute_ms = recompute_ms;
    t.storages[s].recompute_from = {static_cast<std::int32_t>(s - 1)};
  }
  return t;
}
}  // namespace

// A link 10x slower than options()'s: every 64 MiB copy takes ~13 ms against 1 ms of compute between calls,
// so copies stall and cheap recomputations are the faster plan (Note [Recompute cost]).
SavedPlanOptions slow_link(std::uint64_t limit) {
  SavedPlanOptions o = options(limit);
  o.d2h_bytes_per_s = o.h2d_bytes_per_s = 5e9;
  return o;
}

TEST(SavedPlan, RecomputesWhatItCanBeforeCopyingAndKeepsWhatARecomputationReads) {
  const SavedTrace t = with_recipes(8, 0.01);
  const SavedPlan p = plan_saved_tensors(t, slow_link(256 * MiB + 4 * 64 * MiB));  // half the saved bytes must go
  ASSERT_TRUE(p.fits);
  EXPECT_LE(p.planned_peak, p.limit_bytes);
  EXPECT_EQ(replayed_peak(t, p), p.planned_peak);
  int remade = 0;
  for (const SavedMove& m : p.moves) {
    if (!m.recompute) continue;
    ++remade;
    EXPECT_EQ(m.fetch_at, m.use_at);  // made at its use, no early fetch
    for (const SavedMove& other : p.moves)  // what it reads is never let go
      EXPECT_NE(other.storage, t.storages[static_cast<std::size_t>(m.storage)].recompute_from[0]);
  }
  // At the packs of storages 4, 5 and 6 the outputs 1, 3 and 5 are made again later; at the pack of 7 (the
  // last output, not yet packed before its own call) only a copy is left, of an input no recomputation reads.
  EXPECT_EQ(remade, 3);
  EXPECT_EQ(p.bytes_recomputed, 3 * 64 * MiB);
  EXPECT_EQ(p.bytes_out, 64 * MiB);
  for (const SavedMove& m : p.moves)
    if (!m.recompute) {
      EXPECT_TRUE(m.storage == 4 || m.storage == 6) << m.storage;
    }
  EXPECT_GE(p.predicted_ms, t.step_ms + 3 * 0.01);  // each made-again use waits for its recomputation

  // Turned off, the same limit is met by copies alone, as before.
  SavedPlanOptions off = slow_link(256 * MiB + 4 * 64 * MiB);
  off.recompute = false;
  const SavedPlan c = plan_saved_tensors(t, off);
  EXPECT_TRUE(c.fits);
  EXPECT_EQ(c.bytes_recomputed, 0u);
  EXPECT_EQ(c.bytes_out, 4 * 64 * MiB);
  for (const SavedMove& m : c.moves) EXPECT_FALSE(m.recompute);
}

TEST(SavedPlan, CopiesWhereTheLinkIsIdleAndRecomputesWhereItIsNot) {
  // Note [Recompute cost]: with a fast link the copies of half the saved bytes overlap compute and cost
  // nothing, while each recomputation costs the compute stream 0.5 ms: the plan copies. With a slow link
  // the same copies stall compute for longer than the recomputations take: the plan makes them again.
  const SavedTrace t = with_recipes(8, 0.5);
  const std::uint64_t limit = 256 * MiB + 4 * 64 * MiB;
  const SavedPlan fast = plan_saved_tensors(t, options(limit));
  ASSERT_TRUE(fast.fits);
  EXPECT_EQ(fast.bytes_recomputed, 0u);
  EXPECT_EQ(fast.bytes_out, 4 * 64 * MiB);
  EXPECT_DOUBLE_EQ(fast.predicted_ms, t.step_ms);
  const SavedPlan slow = plan_saved_tensors(t, slow_link(limit));
  ASSERT_TRUE(slow.fits);
  EXPECT_EQ(slow.bytes_recomputed, 3 * 64 * MiB);
  SavedPlanOptions copies = slow_link(limit);
  copies.recompute = false;
  EXPECT_LT(slow.predicted_ms, plan_saved_tensors(t, copies).predicted_ms);
  // A mix: storage 1 is cheap to make again, the other outputs dear; with the fast link only the cheap
  // one is made again where that saves a copy's stall, and never is the mix slower than either extreme.
  SavedTrace mixed = t;
  mixed.storages[1].recompute_ms = 0.001;
  for (const SavedPlanOptions& o : {options(limit), slow_link(limit)}) {
    const SavedPlan p = plan_saved_tensors(mixed, o);
    SavedPlanOptions off = o;
    off.recompute = false;
    EXPECT_LE(p.predicted_ms, plan_saved_tensors(mixed, off).predicted_ms);
    EXPECT_LE(replayed_peak(mixed, p), o.limit_bytes);
  }
}

TEST(SavedPlan, CopiesComeFirstWhenPreferringRecomputationKeepsTooMuchOnTheDevice) {
  // Storage 1 (16 MiB) can be made again from storage 0 (256 MiB): preferring that keeps 0 on the device,
  // and at storage 2's pack the limit needs 256 MiB away. Preferring copies fits: that plan is taken (Note [Recompute]).
  SavedTrace t;
  const std::uint64_t base = 64 * MiB, big = 256 * MiB, small = 16 * MiB;
  t.storages = {stored(big, true), stored(small, true), stored(big, false)};
  t.storages[1].recompute_ms = 0.01;
  t.storages[1].recompute_from = {0};
  const std::uint64_t a = base + big, b = a + small, top = b + big;
  t.events = {{SavedEventKind::pack, 0, 0, a, a},       {SavedEventKind::pack, 1, 1, b, b},
              {SavedEventKind::pack, 2, 2, top, top},   {SavedEventKind::unpack, 2, 3, top, top},
              {SavedEventKind::unpack, 1, 4, b, b},     {SavedEventKind::unpack, 0, 5, a, a}};
  t.optimizer_ms = 1;
  t.step_ms = 7;
  SavedPlanOptions o = options(b);
  const SavedPlan p = plan_saved_tensors(t, o);
  EXPECT_TRUE(p.fits);
  EXPECT_LE(replayed_peak(t, p), o.limit_bytes);
  EXPECT_EQ(p.bytes_recomputed, 0u);
  EXPECT_EQ(p.bytes_out, big);
  o.recompute = false;
  EXPECT_EQ(plan_saved_tensors(t, o).moves, p.moves);
}

TEST(SavedPlan, ARecomputationWhoseInputIsAwayIsNotChosen) {
  // Under a limit that needs more than the recomputable bytes, inputs are copied too, but never an input
  // of a chosen recomputation, and never a recomputation whose input was let go first.
  const SavedTrace t = with_recipes(8, 0.01);
  const SavedPlan p = plan_saved_tensors(t, options(256 * MiB + 64 * MiB));
  std::vector<std::int32_t> released(t.storages.size(), -1);
  for (const SavedMove& m : p.moves) released[static_cast<std::size_t>(m.storage)] = m.release_at;
  for (const SavedMove& m : p.moves) {
    if (!m.recompute) continue;
    const auto in = static_cast<std::size_t>(t.storages[static_cast<std::size_t>(m.storage)].recompute_from[0]);
    EXPECT_EQ(released[in], -1) << "storage " << m.storage << " is made from storage " << in << ", let go";
  }
  EXPECT_EQ(saved_plan_from_json(saved_plan_to_json(p)).moves, p.moves);
}

namespace {
// A chain: storage 2 is made from 1, which is made from 0 (SwiGLU: the product from silu(gate), from gate);
// backward unpacks in `order`.
SavedTrace chain(std::initializer_list<int> order) {
  SavedTrace t;
  const std::uint64_t base = 256 * MiB, b = 64 * MiB;
  for (int s = 0; s < 5; ++s) t.storages.push_back(stored(b, true));
  t.storages[1].recompute_ms = 0.01;
  t.storages[1].recompute_from = {0};
  t.storages[2].recompute_ms = 0.02;
  t.storages[2].recompute_from = {1};
  double now = 0;
  for (int s = 0; s < 5; ++s, now += 1) {
    const std::uint64_t live = base + b * static_cast<std::uint64_t>(s + 1);
    t.events.push_back({SavedEventKind::pack, s, now, live, live});
  }
  std::uint64_t live = base + 3 * b;  // the loss's 2b freed before backward
  for (int s : order) {
    t.events.push_back({SavedEventKind::unpack, s, now, live, live});
    live -= b;
    now += 1;
  }
  t.optimizer_ms = 1;
  t.step_ms = now + 1;
  return t;
}
}  // namespace

TEST(SavedPlan, AChainIsMadeAgainAndWhatItReadsIsNeverCopied) {
  const std::uint64_t base = 256 * MiB, b = 64 * MiB;
  // 1 is used before 2: at the pack of 3 storage 2 goes first (used last); at the pack of 4 storage 1, made
  // again from 0 at its own use, before 2 reads it. Nothing is copied; 0 (what the chain starts from) stays.
  {
    const SavedTrace t = chain({1, 2, 0, 3, 4});
    const SavedPlan p = plan_saved_tensors(t, options(base + 3 * b));
    ASSERT_TRUE(p.fits);
    EXPECT_EQ(p.bytes_out, 0u);
    EXPECT_EQ(p.bytes_recomputed, 2 * b);
    for (const SavedMove& m : p.moves) {
      EXPECT_TRUE(m.recompute) << m.storage;
      EXPECT_NE(m.storage, 0);
      EXPECT_EQ(m.fetch_at, m.use_at) << m.storage;
    }
    EXPECT_EQ(replayed_peak(t, p), p.planned_peak);
    EXPECT_LE(p.planned_peak, p.limit_bytes);
  }
  // 2 is used before 1: 1 goes first (used last), then 2, made from 1: making 2 at its use makes 1 there too,
  // so 1 is back from 2's use on (its fetch_at), and both recomputations are paid there.
  {
    const SavedTrace t = chain({2, 1, 0, 3, 4});
    const SavedPlan p = plan_saved_tensors(t, options(base + 3 * b));
    ASSERT_TRUE(p.fits);
    EXPECT_EQ(p.bytes_out, 0u);
    const SavedMove* one = nullptr;
    const SavedMove* two = nullptr;
    for (const SavedMove& m : p.moves) {
      if (m.storage == 1) one = &m;
      if (m.storage == 2) two = &m;
    }
    ASSERT_TRUE(one && two);
    EXPECT_TRUE(one->recompute && two->recompute);
    EXPECT_EQ(two->fetch_at, two->use_at);
    EXPECT_EQ(one->fetch_at, two->use_at) << "made with 2, before its own use " << one->use_at;
    EXPECT_EQ(replayed_peak(t, p), p.planned_peak);
    EXPECT_LE(p.planned_peak, p.limit_bytes);
    EXPECT_NEAR(p.predicted_ms, t.step_ms + 0.01 + 0.02, 1e-9);
  }
  // A recomputation never reads a storage that was copied out: with 1's recipe gone, 2 cannot be made again
  // once 1 is copied, and 1 is not copied while 2 is to be made from it.
  {
    SavedTrace t = chain({1, 2, 0, 3, 4});
    t.storages[1].recompute_ms = -1;
    t.storages[1].recompute_from.clear();
    const SavedPlan p = plan_saved_tensors(t, options(base + 3 * b));
    std::vector<char> copied(t.storages.size(), 0), remade(t.storages.size(), 0);
    for (const SavedMove& m : p.moves) (m.recompute ? remade : copied)[static_cast<std::size_t>(m.storage)] = 1;
    EXPECT_FALSE(remade[2] && copied[1]);
  }
}

TEST(SavedTraceJson, RecipesRoundTripAndOldTracesReadWithout) {
  const SavedTrace t = with_recipes(4, 0.5);
  EXPECT_EQ(saved_trace_from_json(saved_trace_to_json(t)), t);
  const SavedTrace old = saved_trace_from_json(saved_trace_to_json(layered(2, 64 * MiB, 0, 1.0)));
  for (const SavedStorage& s : old.storages) {
    EXPECT_LT(s.recompute_ms, 0);
    EXPECT_TRUE(s.recompute_from.empty());
  }
  std::string text = saved_trace_to_json(t);
  const std::string from = "\"recompute_from\":[0]";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), "\"recompute_from\":[99]");
  try {
    saved_trace_from_json(text);
    ADD_FAILURE() << "accepted";
  } catch (const format_error& e) {
    EXPECT_NE(std::string(e.what()).find("field 'recompute_from' names storage 99"), std::string::npos) << e.what();
  }
  SavedTrace grouped = t;
  grouped.storages[1].recompute_group = 7;
  EXPECT_EQ(saved_trace_from_json(saved_trace_to_json(grouped)), grouped);
  EXPECT_FALSE(saved_plan_options_from_json("{\"limit_bytes\":1,\"d2h_bytes_per_s\":1,\"h2d_bytes_per_s\":1,"
                                            "\"recompute\":false}")
                   .recompute);
}

TEST(SavedPlan, AGroupMadeAgainAtOneCallCostsOneRun) {
  // Note [Recompute cost]: storages 1 and 3 are two outputs of one module call (one run makes both, each
  // carries the run's 2 ms); made again at the same call they cost one run, at two calls two runs.
  SavedTrace t = with_recipes(4, 2.0);
  t.storages[3].recompute_from = {0, 1};  // made with 1 (a chain): at 3's use both are made
  t.storages[1].recompute_group = t.storages[3].recompute_group = 0;
  SavedPlan p;
  const auto use_of = [&](int s) {
    for (std::size_t i = 0; i < t.events.size(); ++i)
      if (t.events[i].kind == SavedEventKind::unpack && t.events[i].storage == s) return static_cast<std::int32_t>(i);
    return -1;
  };
  p.moves = {{1, 1, 3, use_of(3), use_of(1), true}, {3, 3, 4, use_of(3), use_of(3), true}};
  predict_saved_plan(t, options(1 << 30), p);
  EXPECT_DOUBLE_EQ(p.predicted_ms, t.step_ms + 2.0);
  p.moves[0].fetch_at = use_of(1);  // made at its own use: the module runs twice
  predict_saved_plan(t, options(1 << 30), p);
  EXPECT_DOUBLE_EQ(p.predicted_ms, t.step_ms + 4.0);
  t.storages[1].recompute_group = t.storages[3].recompute_group = -1;  // ungrouped: each its own run
  p.moves[0].fetch_at = use_of(3);
  predict_saved_plan(t, options(1 << 30), p);
  EXPECT_DOUBLE_EQ(p.predicted_ms, t.step_ms + 4.0);
}

// Note [Block recompute]: 8 blocks, each saving three 64 MiB storages from an input the next op saves (a
// transformer layer's residual stream). Over a slow link the copies stall for longer than running a block
// again (2 ms): whole blocks are made again, each by one run at its first member's use, and their inputs
// stay. Over a fast link the copies overlap compute and are free: nothing is run again.
TEST(SavedPlan, ABlockIsRunAgainOnceWhereItsCopiesWouldStall) {
  SavedTrace t = layered(32, 64 * MiB, 256 * MiB, 1.0);
  for (int b = 0; b < 8; ++b) {
    t.blocks.push_back({2.0, {4 * b}});
    for (int k = 1; k < 4; ++k) t.storages[static_cast<std::size_t>(4 * b + k)].block = b;
  }
  const std::uint64_t limit = 256 * MiB + 20 * 64 * MiB;  // 12 of 32 storages must go
  const SavedPlan slow = plan_saved_tensors(t, slow_link(limit));
  ASSERT_TRUE(slow.fits);
  EXPECT_LE(replayed_peak(t, slow), limit);
  EXPECT_EQ(slow.bytes_out, 0u);
  EXPECT_EQ(slow.bytes_recomputed, 12 * 64 * MiB);
  std::vector<int> runs(8, 0);
  for (const SavedMove& m : slow.moves) {
    ASSERT_TRUE(m.by_block);
    const std::int32_t b = t.storages[static_cast<std::size_t>(m.storage)].block;
    EXPECT_EQ(m.storage % 4, 1 + (m.storage - 4 * b - 1));  // never an input
    ++runs[static_cast<std::size_t>(b)];
  }
  EXPECT_EQ(std::count(runs.begin(), runs.end(), 3), 4) << "four whole blocks";
  EXPECT_NEAR(slow.predicted_ms, t.step_ms + 4 * 2.0, 1e-9) << "each block runs once";
  SavedPlanOptions copies = slow_link(limit);
  copies.recompute = false;
  EXPECT_LT(slow.predicted_ms, plan_saved_tensors(t, copies).predicted_ms);
  const SavedPlan fast = plan_saved_tensors(t, options(limit));
  ASSERT_TRUE(fast.fits);
  EXPECT_EQ(fast.bytes_recomputed, 0u);
  EXPECT_DOUBLE_EQ(fast.predicted_ms, t.step_ms);
  // The trace's blocks survive JSON, and a block out of range is named.
  EXPECT_EQ(saved_trace_from_json(saved_trace_to_json(t)), t);
  SavedTrace bad = t;
  bad.storages[1].block = 9;
  try {
    saved_trace_from_json(saved_trace_to_json(bad));
    ADD_FAILURE() << "accepted";
  } catch (const format_error& e) {
    EXPECT_NE(std::string(e.what()).find("storage 1: field 'block' = 9 is out of range"), std::string::npos) << e.what();
  }
  EXPECT_EQ(saved_plan_from_json(saved_plan_to_json(slow)).moves, slow.moves);
}

// Note [Block inputs]: under checkpointing's own peak (every block run again, its inputs kept) the inputs leave
// too, each copied back by its block's run; the run waits for that copy, so a slower link shows in the step.
TEST(SavedPlan, BlockInputsAreCopiedOutAndBackBeforeTheirBlockRunsAgain) {
  SavedTrace t = layered(32, 64 * MiB, 256 * MiB, 1.0);
  for (int b = 0; b < 8; ++b) {
    t.blocks.push_back({2.0, {4 * b}});
    for (int k = 1; k < 4; ++k) t.storages[static_cast<std::size_t>(4 * b + k)].block = b;
  }
  // Every block run again keeps its 8 inputs: 256 + 8 x 64 = 768 MiB at forward's end; 640 leaves room for
  // six of them.
  const std::uint64_t limit = 256 * MiB + 6 * 64 * MiB;
  const SavedPlan p = plan_saved_tensors(t, slow_link(limit));
  ASSERT_TRUE(p.fits);
  EXPECT_LE(replayed_peak(t, p), limit);
  EXPECT_EQ(p.planned_peak, replayed_peak(t, p));
  std::vector<std::int32_t> runs_at(8, -1);
  for (const SavedMove& m : p.moves)
    if (m.by_block) runs_at[static_cast<std::size_t>(t.storages[static_cast<std::size_t>(m.storage)].block)] = m.fetch_at;
  EXPECT_LE(std::count(runs_at.begin(), runs_at.end(), -1), 1) << "the blocks run again (but the last)";
  int inputs = 0;
  for (const SavedMove& m : p.moves) {
    if (m.recompute) continue;
    ASSERT_EQ(m.storage % 4, 0) << "a member copied where its block runs again";
    const std::int32_t run = runs_at[static_cast<std::size_t>(m.storage / 4)];
    ASSERT_GE(run, 0) << "input " << m.storage << " copied, its block kept";
    EXPECT_EQ(m.use_at, run) << "input " << m.storage << " is waited for where its block runs";
    EXPECT_GT(m.fetch_at, m.release_at);
    EXPECT_LE(m.fetch_at, run);
    ++inputs;
  }
  EXPECT_GE(inputs, 2) << "two inputs must leave";
  EXPECT_EQ(p.bytes_out, static_cast<std::uint64_t>(inputs) * 64 * MiB);
  EXPECT_EQ(p.bytes_in, p.bytes_out);
  // An input used up before its block runs (block 0 reading block 1's input, storage 4, whose one use comes
  // first in backward) is never copied out while block 0 runs again: the runtime lets it go at that use.
  SavedTrace early = t;
  early.blocks[0].from = {4};
  for (std::uint64_t lim : {limit, limit - 64 * MiB, limit - 128 * MiB}) {
    const SavedPlan e = plan_saved_tensors(early, slow_link(lim));
    bool block0 = false, copied4 = false;
    for (const SavedMove& m : e.moves) {
      block0 = block0 || (m.by_block && early.storages[static_cast<std::size_t>(m.storage)].block == 0);
      copied4 = copied4 || (m.storage == 4 && !m.recompute);
    }
    EXPECT_FALSE(block0 && copied4) << "storage 4 copied out and gone before block 0 runs, limit " << lim / MiB;
  }
  // Note [Block run memory]: a run that adds 128 MiB where it runs (its output, its temporaries) makes the plan let
  // more go to stay under the limit there.
  SavedTrace heavy = t;
  for (SavedBlock& b : heavy.blocks) b.extra_bytes = 128 * MiB;
  const SavedPlan h = plan_saved_tensors(heavy, slow_link(limit));
  ASSERT_TRUE(h.fits);
  EXPECT_LE(replayed_peak(heavy, h), limit);
  EXPECT_EQ(h.planned_peak, replayed_peak(heavy, h));
  EXPECT_GT(replayed_peak(heavy, p), limit) << "the plan without the runs' memory would pass the limit";
  EXPECT_GT(h.bytes_out + h.bytes_recomputed, p.bytes_out + p.bytes_recomputed);
  EXPECT_EQ(saved_trace_from_json(saved_trace_to_json(heavy)), heavy);
  // A link too slow to bring an input back in the block's backward shows as a wait at its run.
  SavedPlanOptions crawl = slow_link(limit);
  crawl.d2h_bytes_per_s = crawl.h2d_bytes_per_s = 0.05e9;  // 64 MiB in 1.3 s
  const SavedPlan slow = plan_saved_tensors(t, crawl);
  ASSERT_TRUE(slow.fits);
  EXPECT_GT(slow.predicted_ms, p.predicted_ms + 1000.0);
}

// Note [Host time]: where the host barely keeps up with the GPU, every copy's host time shows in the step and a
// block's one run is cheaper than copying its members; where the host runs far ahead, it is hidden.
TEST(SavedPlan, TheHostsTimePerCopyShowsWhereTheHostKeepsUpAndBlocksCostTheirLaunch) {
  SavedTrace t = layered(32, 64 * MiB, 256 * MiB, 1.0);
  for (int b = 0; b < 8; ++b) {
    t.blocks.push_back({2.0, {4 * b}, 0.5});
    for (int k = 1; k < 4; ++k) t.storages[static_cast<std::size_t>(4 * b + k)].block = b;
  }
  const std::uint64_t limit = 256 * MiB + 20 * 64 * MiB;
  SavedPlanOptions copies = options(limit);  // a link fast enough to hide every copy
  copies.recompute = false;
  const SavedPlan copied = plan_saved_tensors(t, copies);
  ASSERT_TRUE(copied.fits);
  ASSERT_GT(copied.bytes_out, 0u);
  EXPECT_DOUBLE_EQ(copied.predicted_ms, t.step_ms) << "the GPU alone: no stall";
  const auto moved = static_cast<double>(copied.moves.size());

  SavedTrace bound = t;  // the host reaches each call as the GPU does
  for (SavedEvent& e : bound.events) e.host_ms = e.t_ms;
  SavedPlanOptions costly = copies;
  costly.host_ms_per_copy = 0.5;
  SavedPlan p = copied;
  predict_saved_plan(bound, costly, p);
  EXPECT_NEAR(p.predicted_ms, t.step_ms + 0.5 * 2 * moved, 1e-9) << "out and back, each";
  SavedTrace late = bound;  // the GPU reached the start mark 5 ms after the host: the same
  for (SavedEvent& e : late.events) e.host_ms += 5;
  p = copied;
  predict_saved_plan(late, costly, p);
  EXPECT_NEAR(p.predicted_ms, t.step_ms + 0.5 * 2 * moved, 1e-9);
  SavedTrace ahead = bound;  // the host far ahead: all of it hidden
  for (SavedEvent& e : ahead.events) e.host_ms = 0;
  p = copied;
  predict_saved_plan(ahead, costly, p);
  EXPECT_DOUBLE_EQ(p.predicted_ms, t.step_ms);
  SavedTrace unknown = bound;  // one call's host time unknown: the GPU's walk alone
  unknown.events[3].host_ms = -1;
  p = copied;
  predict_saved_plan(unknown, costly, p);
  EXPECT_DOUBLE_EQ(p.predicted_ms, t.step_ms);

  // With the host's cost (12 ms for 12 storages) the planner runs 4 blocks (2 ms of GPU each, their 0.5 ms of
  // launch under it) rather than copy
  SavedPlanOptions both = costly;
  both.recompute = true;
  const SavedPlan planned = plan_saved_tensors(bound, both);
  ASSERT_TRUE(planned.fits);
  EXPECT_EQ(planned.bytes_out, 0u);
  EXPECT_EQ(planned.bytes_recomputed, 12 * 64 * MiB);
  EXPECT_NEAR(planned.predicted_ms, t.step_ms + 4 * 2.0, 1e-9) << "the blocks' launch is hidden under their GPU time";
  const SavedPlan without = plan_saved_tensors(t, both);  // no host times: copies are free
  EXPECT_EQ(without.bytes_recomputed, 0u);

  // host_ms survives JSON; old traces and options read without it
  EXPECT_EQ(saved_trace_from_json(saved_trace_to_json(bound)), bound);
  EXPECT_EQ(saved_trace_from_json(saved_trace_to_json(t)), t);
  const SavedPlanOptions read = saved_plan_options_from_json(
      "{\"limit_bytes\":1,\"d2h_bytes_per_s\":1,\"h2d_bytes_per_s\":1,\"host_ms_per_copy\":0.2,\"host_ms_per_remake\":0.05}");
  EXPECT_DOUBLE_EQ(read.host_ms_per_copy, 0.2);
  EXPECT_DOUBLE_EQ(read.host_ms_per_remake, 0.05);
  try {
    saved_plan_options_from_json("{\"limit_bytes\":1,\"d2h_bytes_per_s\":1,\"h2d_bytes_per_s\":1,\"host_ms_per_copy\":-1}");
    ADD_FAILURE() << "accepted";
  } catch (const format_error& e) {
    EXPECT_NE(std::string(e.what()).find("host_ms_per_copy"), std::string::npos) << e.what();
  }
}
