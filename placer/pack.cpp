// Packing tensors into page groups (see pack.hpp).
#include "placer/pack.hpp"

#include <algorithm>
#include <map>
#include <queue>
#include <set>

#include "core/error.hpp"

namespace tierpack::placer {
namespace {

std::uint64_t round_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

// Segment tree over an arena's groups: the largest free run of each, and the leftmost group with
// at least `need` free bytes in O(log n). That keeps first-fit over thousands of groups cheap.
class MaxTree {
 public:
  void push(std::uint64_t v) {
    values_.push_back(v);
    if (values_.size() > cap_) {
      cap_ = std::max<std::size_t>(cap_ * 2, 16);
      tree_.assign(2 * cap_, 0);
      for (std::size_t i = 0; i < values_.size(); ++i) tree_[cap_ + i] = values_[i];
      for (std::size_t i = cap_ - 1; i > 0; --i) tree_[i] = std::max(tree_[2 * i], tree_[2 * i + 1]);
    } else {
      set(values_.size() - 1, v);
    }
  }
  void set(std::size_t i, std::uint64_t v) {
    values_[i] = v;
    std::size_t k = cap_ + i;
    tree_[k] = v;
    for (k /= 2; k > 0; k /= 2) tree_[k] = std::max(tree_[2 * k], tree_[2 * k + 1]);
  }
  /// Leftmost index with value >= need, or -1.
  long first_at_least(std::uint64_t need) const {
    if (tree_.empty() || tree_[1] < need) return -1;
    std::size_t k = 1;
    while (k < cap_) k = tree_[2 * k] >= need ? 2 * k : 2 * k + 1;
    return static_cast<long>(k - cap_);
  }

 private:
  std::vector<std::uint64_t> values_, tree_;
  std::size_t cap_ = 0;
};

// One shared group while it is being filled: a bump pointer plus first-fit holes below it.
struct OpenGroup {
  GroupId id = 0;
  std::uint64_t capacity = 0, top = 0, peak = 0;
  std::uint32_t live = 0;
  bool retired = false;
  std::map<std::uint64_t, std::uint64_t> holes;  // offset -> size
  std::multiset<std::uint64_t> hole_sizes;

  std::uint64_t max_free() const {
    if (retired) return 0;
    const std::uint64_t tail = capacity - top;
    return hole_sizes.empty() ? tail : std::max(tail, *hole_sizes.rbegin());
  }
  std::uint64_t alloc(std::uint64_t need) {
    for (auto it = holes.begin(); it != holes.end(); ++it) {
      if (it->second < need) continue;
      const std::uint64_t off = it->first, size = it->second;
      hole_sizes.erase(hole_sizes.find(size));
      holes.erase(it);
      if (size > need) {
        holes[off + need] = size - need;
        hole_sizes.insert(size - need);
      }
      ++live;
      return off;
    }
    const std::uint64_t off = top;
    top += need;
    peak = std::max(peak, top);
    ++live;
    return off;
  }
  void free(std::uint64_t off, std::uint64_t size) {
    --live;
    auto [it, ok] = holes.emplace(off, size);
    hole_sizes.insert(size);
    auto merge_next = [&](std::map<std::uint64_t, std::uint64_t>::iterator a) {
      auto b = std::next(a);
      if (b == holes.end() || a->first + a->second != b->first) return;
      hole_sizes.erase(hole_sizes.find(a->second));
      hole_sizes.erase(hole_sizes.find(b->second));
      a->second += b->second;
      hole_sizes.insert(a->second);
      holes.erase(b);
    };
    merge_next(it);
    if (it != holes.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        merge_next(prev);
        it = prev;
      }
    }
    if (it->first + it->second == top) {
      top = it->first;
      hole_sizes.erase(hole_sizes.find(it->second));
      holes.erase(it);
    }
  }
};

struct Arena {
  std::vector<std::size_t> groups;  // indices into the open-group table
  MaxTree free_runs;
};

struct Slot {
  std::size_t open = static_cast<std::size_t>(-1);  // shared group, or -1 for a group of its own
  std::size_t arena_pos = 0;
  std::uint64_t offset = 0, size = 0;
};

}  // namespace

std::uint64_t GroupLife::size_at(OpIndex op) const {
  if (sizes.empty()) return 0;
  auto it = std::upper_bound(sizes.begin(), sizes.end(), op, [](OpIndex o, const auto& e) { return o < e.first; });
  return it == sizes.begin() ? sizes.front().second : std::prev(it)->second;
}

void add_group_bytes(std::vector<std::int64_t>& diff, const GroupLife& life, OpIndex a, OpIndex b, std::int64_t sign) {
  if (a > b || diff.empty()) return;
  std::uint64_t cur = life.size_at(a);
  diff[static_cast<std::size_t>(a)] += sign * static_cast<std::int64_t>(cur);
  for (const auto& [op, bytes] : life.sizes) {
    if (op <= a || op > b) continue;
    diff[static_cast<std::size_t>(op)] += sign * (static_cast<std::int64_t>(bytes) - static_cast<std::int64_t>(cur));
    cur = bytes;
  }
  diff[static_cast<std::size_t>(b) + 1] -= sign * static_cast<std::int64_t>(cur);
}

void grow_group(GroupLife& life, OpIndex op, std::uint64_t bytes) {
  op = std::max<OpIndex>(op, 0);
  if (!life.sizes.empty() && life.sizes.back().second >= bytes) return;
  if (!life.sizes.empty() && life.sizes.back().first >= op) life.sizes.back().second = bytes;
  else life.sizes.emplace_back(op, bytes);
}

namespace {

class Packer {
 public:
  Packer(const Profile& p, const Classification& c, const PackOptions& o) : profile_(p), classes_(c), opts_(o) {
    large_ = o.large_bytes ? o.large_bytes : std::max(o.group_bytes / 4, o.page_size);
    slots_.resize(c.tensors.size());
    tensor_group_.resize(c.tensors.size());
  }

  Packing run() {
    const auto n_ops = static_cast<OpIndex>(profile_.ops.size());
    // Tensors alive at the start are placed first: by access pattern (page-aware, so that groups
    // hold tensors used together) or by address (the order the framework allocated them).
    std::vector<std::size_t> before, order(classes_.tensors.size());
    for (std::size_t i = 0; i < classes_.tensors.size(); ++i)
      if (classes_.tensors[i].birth == kBeforeIteration) before.push_back(i);
    auto first_use = [&](std::size_t i) { const auto& u = classes_.tensors[i].uses; return u.empty() ? kAfterIteration : u.front(); };
    if (opts_.policy == PackPolicy::page_aware) {
      std::sort(before.begin(), before.end(), [&](std::size_t a, std::size_t b) {
        const auto &ta = classes_.tensors[a], &tb = classes_.tensors[b];
        return std::tuple(ta.pack_key, first_use(a), ta.id) < std::tuple(tb.pack_key, first_use(b), tb.id);
      });
    } else {
      std::sort(before.begin(), before.end(), [&](std::size_t a, std::size_t b) {
        const auto &ra = profile_.tensors[classes_.tensors[a].id], &rb = profile_.tensors[classes_.tensors[b].id];
        return std::tuple(ra.address, ra.id) < std::tuple(rb.address, rb.id);
      });
    }
    for (auto i : before) place(i);
    // Then allocations and frees in timeline order: births at op i, then frees after op i.
    std::vector<std::vector<std::size_t>> births(static_cast<std::size_t>(std::max<OpIndex>(n_ops, 1)));
    std::vector<std::vector<std::size_t>> deaths(births.size());
    for (std::size_t i = 0; i < classes_.tensors.size(); ++i) {
      const auto& t = classes_.tensors[i];
      if (t.birth != kBeforeIteration) births[static_cast<std::size_t>(t.birth)].push_back(i);
      if (t.death != kAfterIteration) deaths[static_cast<std::size_t>(t.death)].push_back(i);
    }
    for (std::size_t op = 0; op < births.size(); ++op) {
      auto& b = births[op];
      std::sort(b.begin(), b.end(), [&](std::size_t x, std::size_t y) {
        const auto &rx = profile_.tensors[classes_.tensors[x].id], &ry = profile_.tensors[classes_.tensors[y].id];
        return std::tuple(rx.seq, rx.id) < std::tuple(ry.seq, ry.id);
      });
      for (auto i : b) place(i);
      for (auto i : deaths[op]) release(i);
    }
    return finish(n_ops);
  }

 private:
  std::uint32_t arena_key(const TensorInfo& t) const {
    const std::uint32_t key = opts_.policy == PackPolicy::page_aware ? t.pack_key : 0;
    return t.pinned ? (key | 0x80000000u) : key;
  }

  void place(std::size_t i) {
    const auto& t = classes_.tensors[i];
    const std::uint64_t bytes = profile_.tensors[t.id].bytes;
    auto& slot = slots_[i];
    if (bytes >= large_) {
      slot.open = static_cast<std::size_t>(-1);
      slot.offset = 0;
      slot.size = round_up(std::max<std::uint64_t>(bytes, 1), opts_.page_size);
      members_.push_back({i});
      own_size_.push_back(slot.size);
      growth_.emplace_back();
      grow_group(growth_.back(), t.birth, slot.size);
      group_of_.push_back(static_cast<std::size_t>(-1));
      tensor_group_[i] = static_cast<GroupId>(members_.size() - 1);
      return;
    }
    const std::uint64_t need = round_up(std::max<std::uint64_t>(bytes, 1), opts_.alignment);
    auto& arena = arenas_[arena_key(t)];
    long pos = arena.free_runs.first_at_least(need);
    if (pos < 0) {
      OpenGroup g;
      g.id = static_cast<GroupId>(members_.size());
      g.capacity = std::max(opts_.group_bytes, round_up(need, opts_.page_size));
      members_.emplace_back();
      own_size_.push_back(0);
      growth_.emplace_back();
      open_.push_back(std::move(g));
      group_of_.push_back(open_.size() - 1);
      arena.groups.push_back(open_.size() - 1);
      arena.free_runs.push(open_.back().max_free());
      open_arena_key_.push_back(arena_key(t));
      pos = static_cast<long>(arena.groups.size() - 1);
    }
    const std::size_t oi = arena.groups[static_cast<std::size_t>(pos)];
    auto& g = open_[oi];
    slot.open = oi;
    slot.arena_pos = static_cast<std::size_t>(pos);
    slot.offset = g.alloc(need);
    slot.size = need;
    members_[g.id].push_back(i);
    grow_group(growth_[g.id], t.birth, round_up(g.peak, opts_.page_size));
    tensor_group_[i] = g.id;
    arena.free_runs.set(slot.arena_pos, g.max_free());
  }

  void release(std::size_t i) {
    const auto& slot = slots_[i];
    if (slot.open == static_cast<std::size_t>(-1)) return;
    auto& g = open_[slot.open];
    g.free(slot.offset, slot.size);
    if (g.live == 0) g.retired = true;  // an empty group is released; later tensors open new ones
    arenas_[open_arena_key_[slot.open]].free_runs.set(slot.arena_pos, g.max_free());
  }

  Packing finish(OpIndex n_ops);

  const Profile& profile_;
  const Classification& classes_;
  const PackOptions& opts_;
  std::uint64_t large_ = 0;
  std::vector<Slot> slots_;
  std::map<std::uint32_t, Arena> arenas_;
  std::vector<OpenGroup> open_;
  std::vector<std::uint32_t> open_arena_key_;
  std::vector<std::vector<std::size_t>> members_;  // per group id: tensor indices (into classes_.tensors)
  std::vector<std::uint64_t> own_size_;            // per group id: size of a single-tensor group, else 0
  std::vector<std::size_t> group_of_;              // per group id: index into open_ (shared groups)
  std::vector<GroupId> tensor_group_;
  std::vector<GroupLife> growth_;                  // per group id: its sizes over time
};

// First-fit placement of groups in the device's group address space over time; one region per
// class (page-aware) so that groups of one class used together sit next to each other.
std::uint64_t assign_offsets(std::vector<PageGroup>& groups, const std::vector<GroupLife>& lives, OpIndex n_ops,
                             bool region_per_class) {
  std::map<int, std::vector<GroupId>> regions;
  for (const auto& g : groups) regions[g.pinned ? kTensorClassCount : (region_per_class ? int(g.cls) : 0)].push_back(g.id);
  std::uint64_t base = 0;
  constexpr std::uint64_t kRegionAlign = 2ull << 20;
  for (auto& [region, ids] : regions) {
    auto start = [&](GroupId g) { return lives[g].exists_at_start() ? OpIndex(-1) : lives[g].birth; };
    auto stop = [&](GroupId g) { return lives[g].exists_at_end() ? n_ops : lives[g].death; };
    std::stable_sort(ids.begin(), ids.end(), [&](GroupId a, GroupId b) { return start(a) < start(b); });
    std::map<std::uint64_t, std::uint64_t> holes;
    std::uint64_t top = 0, peak = 0;
    using Ending = std::pair<OpIndex, GroupId>;
    std::priority_queue<Ending, std::vector<Ending>, std::greater<>> ending;
    auto give_back = [&](GroupId g) {
      const std::uint64_t off = groups[g].offset - base, size = groups[g].bytes;
      auto [it, ok] = holes.emplace(off, size);
      if (auto nx = std::next(it); nx != holes.end() && it->first + it->second == nx->first) {
        it->second += nx->second;
        holes.erase(nx);
      }
      if (it != holes.begin()) {
        auto pv = std::prev(it);
        if (pv->first + pv->second == it->first) {
          pv->second += it->second;
          holes.erase(it);
          it = pv;
        }
      }
      if (it->first + it->second == top) {
        top = it->first;
        holes.erase(it);
      }
    };
    for (GroupId g : ids) {
      while (!ending.empty() && ending.top().first < start(g)) {
        give_back(ending.top().second);
        ending.pop();
      }
      const std::uint64_t size = groups[g].bytes;
      std::uint64_t off = top;
      bool from_hole = false;
      for (auto it = holes.begin(); it != holes.end(); ++it) {
        if (it->second < size) continue;
        off = it->first;
        const std::uint64_t rest = it->second - size;
        holes.erase(it);
        if (rest) holes[off + size] = rest;
        from_hole = true;
        break;
      }
      if (!from_hole) top += size;
      peak = std::max(peak, top);
      groups[g].offset = base + off;
      ending.emplace(stop(g), g);
    }
    base += round_up(peak, kRegionAlign);
  }
  return base;
}

Packing Packer::finish(OpIndex n_ops) {
  Packing out;
  const std::size_t n_groups = members_.size();
  out.groups.resize(n_groups);
  out.lives.resize(n_groups);
  std::vector<std::uint64_t> class_bytes(kTensorClassCount);
  for (std::size_t gi = 0; gi < n_groups; ++gi) {
    auto& g = out.groups[gi];
    auto& life = out.lives[gi];
    g.id = static_cast<GroupId>(gi);
    g.page_size = opts_.page_size;
    g.bytes = own_size_[gi] ? own_size_[gi] : round_up(std::max<std::uint64_t>(open_[group_of_[gi]].peak, 1), opts_.page_size);
    std::fill(class_bytes.begin(), class_bytes.end(), 0);
    OpIndex birth = kAfterIteration, death = kBeforeIteration;
    bool at_start = false, at_end = false;
    std::vector<std::pair<OpIndex, std::uint64_t>> touches;
    for (auto i : members_[gi]) {
      const auto& t = classes_.tensors[i];
      for (auto u : t.uses) touches.emplace_back(u, profile_.tensors[t.id].bytes);
      g.tensors.push_back(t.id);
      g.pinned = g.pinned || t.pinned;
      class_bytes[static_cast<std::size_t>(t.cls)] += profile_.tensors[t.id].bytes;
      if (t.birth == kBeforeIteration) at_start = true;
      else birth = std::min(birth, t.birth);
      if (t.death == kAfterIteration) at_end = true;
      else death = std::max(death, t.death);
    }
    std::sort(touches.begin(), touches.end());
    for (const auto& [op, bytes] : touches) {
      if (!life.uses.empty() && life.uses.back() == op) {
        life.use_bytes.back() += bytes;
      } else {
        life.uses.push_back(op);
        life.use_bytes.push_back(bytes);
      }
    }
    g.cls = static_cast<TensorClass>(std::max_element(class_bytes.begin(), class_bytes.end()) - class_bytes.begin());
    life.sizes = std::move(growth_[gi].sizes);
    life.birth = at_start ? kBeforeIteration : birth;
    life.death = at_end ? kAfterIteration : death;
    g.first_use = life.uses.empty() ? kAfterIteration : life.uses.front();
    g.last_use = life.uses.empty() ? kBeforeIteration : life.uses.back();
  }
  out.address_space_bytes = assign_offsets(out.groups, out.lives, n_ops, opts_.policy == PackPolicy::page_aware);
  out.placements.reserve(classes_.tensors.size());
  for (std::size_t i = 0; i < classes_.tensors.size(); ++i) {
    const auto& t = classes_.tensors[i];
    const auto& rec = profile_.tensors[t.id];
    out.placements.push_back({t.id, rec.seq, rec.address, rec.bytes, t.cls, tensor_group_[i], slots_[i].offset});
  }
  std::sort(out.placements.begin(), out.placements.end(), [](const TensorPlacement& a, const TensorPlacement& b) {
    return std::tuple(a.seq, a.tensor) < std::tuple(b.seq, b.tensor);
  });
  return out;
}

}  // namespace

Packing pack(const Profile& profile, const Classification& classes, const PackOptions& opts) {
  TIERPACK_EXPECTS(opts.page_size > 0 && (opts.page_size & (opts.page_size - 1)) == 0, "page size must be a power of two");
  TIERPACK_EXPECTS(opts.group_bytes >= opts.page_size, "group size must be at least one page");
  TIERPACK_EXPECTS(opts.alignment > 0, "alignment must be positive");
  return Packer(profile, classes, opts).run();
}

}  // namespace tierpack::placer
