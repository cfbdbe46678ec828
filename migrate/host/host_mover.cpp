// HostMover: the worker thread, move_pages batches with per-page status, mbind moves, retries.
// See Note [Host move outcomes] and Note [Transparent huge pages and moves] in host_mover.hpp.
#include "migrate/host/host_mover.hpp"

#include <algorithm>
#include <cerrno>

#include "core/error.hpp"

namespace tierpack::host {
namespace {

constexpr std::uintptr_t kHuge = 2u << 20;

bool is_busy(int err) { return err == EBUSY || err == EAGAIN; }

}  // namespace

HostMover::HostMover(HostArenaAllocator& alloc, MoverOptions options, ForeignPages* foreign)
    : alloc_(alloc), foreign_(foreign), os_(alloc.os()), options_(options) {
  TIERPACK_EXPECTS(options_.batch_pages > 0, "batch_pages must be positive");
  if (options_.worker) worker_ = std::thread([this] { run(); });
}

HostMover::~HostMover() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    counters_.moves_dropped += queue_.size();
    for (Job& j : queue_) release_room(j);  // retries of prefetches hold their room
    queue_.clear();
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::uint64_t HostMover::submit(const Move& m, MoveOrder /*order*/) {
  TIERPACK_EXPECTS(alloc_.serves(m.to), "move target is not a host tier of the allocator");
  Job job;
  job.move = m;
  {
    std::lock_guard lock(mu_);
    ++counters_.moves_submitted;
    job.generation = ++generation_[m.group];
    if (options_.worker) {
      const std::uint64_t request = job.generation;
      queue_.push_back(std::move(job));
      cv_.notify_one();
      return request;
    }
  }
  // Synchronous mode: the same path as the worker, on this thread. Nothing queued can make room.
  if (!reserve_room(job)) {
    std::lock_guard lock(mu_);
    ++counters_.moves_over_budget;
    return job.generation;
  }
  for (;;) {
    MoveResult r = execute(job);
    std::lock_guard lock(mu_);
    finish(job, r);
    if (!r.has_busy() || stop_) return job.generation;
    job.pages = std::move(r.busy_pages);
    job.foreign_pages = std::move(r.foreign_busy);
    ++job.attempt;
  }
}

void HostMover::reached(std::int64_t now) {
  std::lock_guard lock(mu_);
  auto mark = [&](Job& j) {
    if (j.move.kind == MoveKind::prefetch && !j.late && j.move.needed_by <= now) {
      j.late = true;
      ++counters_.moves_late;
    }
  };
  for (Job& j : queue_) mark(j);
  if (running_job_) mark(current_);
}

bool HostMover::in_flight(GroupId group) const {
  std::lock_guard lock(mu_);
  if (running_job_ && current_.move.group == group) return true;
  for (const Job& j : queue_) {
    if (j.move.group == group) return true;
  }
  return false;
}

bool HostMover::done(GroupId group, std::uint64_t request) const {
  std::lock_guard lock(mu_);
  auto before = [&](const Job& j) { return j.move.group == group && j.generation <= request; };
  if (running_job_ && before(current_)) return false;
  return std::none_of(queue_.begin(), queue_.end(), before);
}

void HostMover::wait_idle() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !running_job_; });
}

MoveCounters HostMover::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

MoveCounters HostMover::take_counters() {
  std::lock_guard lock(mu_);
  MoveCounters c = counters_;
  counters_ = MoveCounters{};
  return c;
}

MoveResult HostMover::move_now(GroupId group, TierId to, MoveKind kind) {
  TIERPACK_EXPECTS(alloc_.serves(to), "move target is not a host tier of the allocator");
  Job job;
  job.move.group = group;
  job.move.kind = kind;
  job.move.to = to;
  MoveResult total;
  {
    std::lock_guard lock(mu_);
    ++counters_.moves_submitted;
    total.counters.moves_submitted = 1;
    job.generation = ++generation_[group];
  }
  for (;;) {
    MoveResult r = execute(job);
    {
      std::lock_guard lock(mu_);
      total.counters.add(finish(job, r));
    }
    if (!r.has_busy()) break;
    job.pages = std::move(r.busy_pages);
    job.foreign_pages = std::move(r.foreign_busy);
    ++job.attempt;
    std::this_thread::yield();
  }
  total.complete = total.counters.moves_complete == 1;
  return total;
}

void HostMover::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    if (!reserve_room(queue_.front())) {
      Job waiting = std::move(queue_.front());
      queue_.pop_front();
      if (!queue_.empty() && waiting.deferrals < options_.max_deferrals) {
        ++waiting.deferrals;  // behind the evictions that may make room
        queue_.push_back(std::move(waiting));
      } else {
        ++counters_.moves_over_budget;  // stays on the slow tier: correct, slower
        if (queue_.empty() && !running_job_) idle_cv_.notify_all();
      }
      continue;
    }
    current_ = std::move(queue_.front());
    queue_.pop_front();
    running_job_ = true;
    const Job job = current_;
    lock.unlock();
    MoveResult r;
    try {
      r = execute(job);
    } catch (const std::exception&) {
      // Bookkeeping ran out of memory; the pages are where they were. Count and go on.
      r = MoveResult{};
      r.counters.failures_by_errno[ENOMEM] += 1;
    }
    lock.lock();
    current_.pages.clear();
    current_.foreign_pages.clear();
    current_.reserved = job.reserved;
    Job done = current_;  // keeps the late flag set by reached() while it ran
    running_job_ = false;
    finish(done, r);
    if (r.has_busy()) {
      // finish() asked for a retry: requeue behind the other moves (Note [Host move outcomes]).
      done.pages = std::move(r.busy_pages);
      done.foreign_pages = std::move(r.foreign_busy);
      ++done.attempt;
      queue_.push_back(std::move(done));
    }
    if (queue_.empty() && !running_job_) idle_cv_.notify_all();
  }
  idle_cv_.notify_all();
}

// Called with mu_ held. Folds one attempt's result into the counters and returns its share; leaves
// r.busy_pages non-empty only when the caller should retry them.
MoveCounters HostMover::finish(Job& job, MoveResult& r) {
  MoveCounters d = r.counters;
  if (!r.ranges.empty()) job.ranges = std::move(r.ranges);  // a first attempt: what the move covers
  if (!r.foreign.empty()) job.foreign = std::move(r.foreign);
  const bool superseded = generation_[job.move.group] != job.generation;
  if (r.has_busy()) {
    const std::size_t busy = r.busy_pages.size() + r.foreign_busy.size();
    if (job.attempt < options_.max_retries && !superseded && !stop_) {
      d.pages_retried += busy;
    } else {
      d.failures_by_errno[EBUSY] += busy;
      d.pages_failed += busy;
      r.busy_pages.clear();
      r.foreign_busy.clear();
      if (superseded) ++d.moves_dropped;
    }
  }
  const std::uint64_t bytes = d.pages_moved * os_.page_size();
  (job.move.kind == MoveKind::prefetch ? d.bytes_to_fast : d.bytes_to_slow) += bytes;
  job.failed = job.failed || d.pages_failed > 0 || !d.failures_by_errno.empty();
  if (!r.has_busy()) {  // final attempt
    if (job.failed) {
      ++d.moves_partial;
      release_room(job);
    } else {
      ++d.moves_complete;
      try {
        if (foreign_ && !job.foreign.empty()) job.reserved = foreign_->set_tier(job.foreign, job.move.to, job.reserved);
        alloc_.set_group_tier(job.move.group, job.move.to, job.reserved, &job.ranges);
        job.reserved = 0;
      } catch (...) {
        // Only accounting: the pages did move.
      }
      release_room(job);
    }
  }
  counters_.add(d);
  return d;
}

bool HostMover::reserve_room(Job& job) {
  if (job.move.kind != MoveKind::prefetch || job.attempt > 0 || job.reserved > 0) return true;
  try {
    std::uint64_t bytes = alloc_.group_bytes(job.move.group);
    if (foreign_) bytes += foreign_->movable_bytes(job.move.group, job.move.to);
    if (!alloc_.reserve(job.move.to, bytes)) return false;
    job.reserved = bytes;
    return true;
  } catch (...) {
    return true;  // no accounting: move as planned
  }
}

void HostMover::release_room(Job& job) noexcept {
  alloc_.release(job.move.to, job.reserved);
  job.reserved = 0;
}

MoveResult HostMover::execute(const Job& job) {
  MoveResult out;
  const int node = alloc_.node_of(job.move.to);
  const std::uintptr_t page = os_.page_size();
  if (job.attempt > 0) {  // a retry of busy pages
    move_page_list(job.pages, node, out);
    move_foreign_pages(job.foreign_pages, node, out);
    return out;
  }
  const std::vector<PageRange> ranges = alloc_.group_ranges(job.move.group);
  out.ranges = ranges;
  if (foreign_) out.foreign = foreign_->movable(job.move.group, job.move.to);
  if (ranges.empty() && out.foreign.empty()) {
    out.counters.moves_empty = 1;
    return out;
  }
  if (!out.foreign.empty()) {  // Note [Moves carry foreign pages]: always page by page, never mbind
    std::vector<ForeignPage> fp;
    for (const ForeignPages::Entry& e : out.foreign)
      for (std::uintptr_t a = e.pages.begin; a < e.pages.end; a += page)
        fp.push_back({e.id, e.address, reinterpret_cast<void*>(a)});
    move_foreign_pages(fp, node, out);
  }

  if (options_.method == MoverOptions::Method::mbind) {
    for (const PageRange& r : ranges) {
      void* addr = reinterpret_cast<void*>(r.begin);
      const int err = os_.bind(addr, r.bytes(), node, alloc_.bind_mode(), /*move=*/true);
      if (err == 0) {
        out.counters.pages_moved += r.bytes() / page;
      } else if (is_busy(err)) {
        for (std::uintptr_t a = r.begin; a < r.end; a += page) out.busy_pages.push_back(reinterpret_cast<void*>(a));
      } else {
        out.counters.failures_by_errno[err] += 1;  // EIO: some pages stayed; the call does not say which
        out.counters.pages_failed += 1;
      }
    }
    return out;
  }

  std::vector<void*> base_pages;
  std::vector<void*> chunks;
  for (const PageRange& r : ranges) {
    std::uintptr_t a = r.begin;
    while (a < r.end) {
      if (options_.huge_page_stride && a % kHuge == 0 && a + kHuge <= r.end) {
        chunks.push_back(reinterpret_cast<void*>(a));
        a += kHuge;
      } else {
        base_pages.push_back(reinterpret_cast<void*>(a));
        a += page;
      }
    }
  }
  if (!chunks.empty()) {
    // One address per huge page, then find and move the base pages that did not come along.
    MoveResult first;
    move_page_list(chunks, node, first);
    std::vector<void*> all;
    all.reserve(chunks.size() * (kHuge / page));
    for (void* c : chunks) {
      for (std::uintptr_t a = reinterpret_cast<std::uintptr_t>(c); a < reinterpret_cast<std::uintptr_t>(c) + kHuge;
           a += page) {
        all.push_back(reinterpret_cast<void*>(a));
      }
    }
    std::vector<int> status(all.size());
    if (os_.move_pages(all, {}, status) == 0) {
      for (std::size_t i = 0; i < all.size(); ++i) {
        if (status[i] == node) {
          ++out.counters.pages_moved;
        } else if (status[i] == -ENOENT) {
          ++out.counters.pages_absent;
        } else if (status[i] == -EFAULT) {
          ++out.counters.pages_zero;
        } else {
          base_pages.push_back(all[i]);
        }
      }
    } else {
      base_pages.insert(base_pages.end(), all.begin(), all.end());
    }
  }
  move_page_list(base_pages, node, out);

  // Pages that fault in later (untouched or purged) must come from the target too.
  for (const PageRange& r : ranges) {
    if (int err = os_.bind(reinterpret_cast<void*>(r.begin), r.bytes(), node, alloc_.bind_mode(), false)) {
      out.counters.failures_by_errno[err] += 1;
    }
  }
  return out;
}

void HostMover::move_foreign_pages(const std::vector<ForeignPage>& pages, int node, MoveResult& out) {
  std::vector<void*> batch;
  MoveResult part;
  for (std::size_t i = 0; i < pages.size();) {
    std::size_t j = i;
    batch.clear();
    while (j < pages.size() && pages[j].id == pages[i].id && batch.size() < options_.batch_pages)
      batch.push_back(pages[j++].page);
    part.busy_pages.clear();
    part.counters = MoveCounters{};
    // Under the registry's lock: a tensor freed before this batch is not touched (Note [Foreign pages]).
    if (foreign_ && foreign_->with_live(pages[i].id, pages[i].owner, [&] { move_page_list(batch, node, part); })) {
      out.counters.add(part.counters);
      for (void* p : part.busy_pages) out.foreign_busy.push_back({pages[i].id, pages[i].owner, p});
    }
    i = j;
  }
}

void HostMover::move_page_list(const std::vector<void*>& pages, int node, MoveResult& out) {
  const std::size_t batch = options_.batch_pages;
  std::vector<int> nodes;
  std::vector<int> status;
  for (std::size_t start = 0; start < pages.size(); start += batch) {
    const std::size_t n = std::min(batch, pages.size() - start);
    nodes.assign(n, node);
    status.assign(n, 0);
    const std::span<void* const> span(pages.data() + start, n);
    const int err = os_.move_pages(span, nodes, status);
    if (err != 0) {
      if (is_busy(err)) {
        out.busy_pages.insert(out.busy_pages.end(), span.begin(), span.end());
      } else {
        out.counters.failures_by_errno[err] += n;
        out.counters.pages_failed += n;
      }
      continue;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const int s = status[i];
      if (s == node) {
        ++out.counters.pages_moved;
      } else if (s == -ENOENT) {
        ++out.counters.pages_absent;
      } else if (s == -EFAULT) {
        ++out.counters.pages_zero;
      } else if (s == -EBUSY || s == -EAGAIN) {
        out.busy_pages.push_back(span[i]);
      } else {
        ++out.counters.failures_by_errno[s < 0 ? -s : 0];
        ++out.counters.pages_failed;
      }
    }
  }
}

}  // namespace tierpack::host
