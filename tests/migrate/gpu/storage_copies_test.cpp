// StorageCopies (the storage mover's batched copies): a batch runs after the work queued on the stream it is
// ordered after and after the events it waits for, in order, and its event covers every copy of it.
#include "migrate/gpu/storage_copies.hpp"

#include <array>
#include <chrono>
#include <optional>
#include <vector>

#include "alloc/gpu/memfd_backend.hpp"
#include "core/error.hpp"
#include "tests/migrate/gpu/mover_fixture.hpp"

namespace tierpack::gpu::testing {
namespace {

using namespace std::chrono_literals;

template <class Kind>
class StorageCopiesTest : public MoverTest<Kind> {
 protected:
  void SetUp() override {
    MoverTest<Kind>::SetUp();
    if (!this->dev_) return;
    this->make(16);
    copies_ = std::make_unique<StorageCopies>(this->backend());
  }
  void TearDown() override {
    if (this->dev_) this->sync_all();
    copies_.reset();
    MoverTest<Kind>::TearDown();
  }
  std::uintptr_t block() {
    return reinterpret_cast<std::uintptr_t>(this->alloc_->allocate(this->chunk(), this->streams_[0]));
  }
  std::unique_ptr<StorageCopies> copies_;
};
TYPED_TEST_SUITE(StorageCopiesTest, Kinds, KindNames);

TYPED_TEST(StorageCopiesTest, ABatchRunsAfterTheWorkQueuedOnItsStreamAndItsEventCoversEveryCopy) {
  const StreamHandle compute = this->streams_[0], copy = this->streams_[1], reader = this->streams_[2];
  const std::size_t n = this->chunk();
  std::array<std::uintptr_t, 3> src{this->block(), this->block(), this->block()};
  std::array<std::uintptr_t, 3> dst{this->block(), this->block(), this->block()};
  this->sync_all();
  for (std::size_t i = 0; i < src.size(); ++i)  // written late on the compute stream: the copies must wait for it
    this->dev_->fill(src[i], n, 100 + i, compute, i == 0 ? 30ms : 0ms);
  const EventHandle done = this->copies_->new_event();
  std::array<StorageCopy, 3> batch;
  for (std::size_t i = 0; i < src.size(); ++i) batch[i] = {dst[i], src[i], n};
  this->copies_->copy(compute, copy, {}, batch, done);
  this->copies_->wait(reader, done);
  for (std::size_t i = 0; i < dst.size(); ++i) this->dev_->check(dst[i], n, 100 + i, reader);
  this->sync_all();  // the twin counts mismatches when its streams have run
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  this->copies_->synchronize(done);
  EXPECT_TRUE(this->copies_->done(done));
  this->copies_->free_event(done);
}

TYPED_TEST(StorageCopiesTest, ABatchWaitsForTheEventsItIsGiven) {
  const StreamHandle writer = this->streams_[0], copy = this->streams_[1], reader = this->streams_[2];
  const std::size_t n = this->chunk();
  const std::uintptr_t a = this->block(), b = this->block(), c = this->block();
  this->sync_all();
  // a -> b on one batch (late), then b -> c on a second batch ordered only by the first batch's event
  this->dev_->fill(a, n, 7, writer, 20ms);
  const EventHandle first = this->copies_->new_event(), second = this->copies_->new_event();
  const StorageCopy ab{b, a, n}, bc{c, b, n};
  this->copies_->copy(writer, this->streams_[3], {}, std::span(&ab, 1), first);
  const EventHandle waits[] = {0, first};  // a 0 entry is skipped
  this->copies_->copy(std::nullopt, copy, waits, std::span(&bc, 1), second);
  this->copies_->wait(reader, second);
  this->dev_->check(c, n, 7, reader);
  this->sync_all();  // the twin counts mismatches when its streams have run
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  this->copies_->free_event(first);
  this->copies_->free_event(second);
}

TYPED_TEST(StorageCopiesTest, ACopyWithANullAddressQueuesNothing) {
  const std::size_t n = this->chunk();
  const std::uintptr_t a = this->block(), b = this->block();
  this->sync_all();
  this->dev_->fill(a, n, 3, this->streams_[0]);
  this->dev_->fill(b, n, 4, this->streams_[0]);
  this->sync_all();
  const EventHandle done = this->copies_->new_event();
  const std::array<StorageCopy, 2> batch{StorageCopy{b, a, n}, StorageCopy{0, a, n}};
  EXPECT_THROW(this->copies_->copy(this->streams_[0], this->streams_[1], {}, batch, done), logic_error);
  const std::array<StorageCopy, 2> empty{StorageCopy{0, 0, 0}, StorageCopy{b, a, 0}};  // nothing to copy: no error
  this->copies_->copy(this->streams_[0], this->streams_[1], {}, empty, done);
  this->copies_->synchronize(done);
  this->dev_->check(b, n, 4, this->streams_[1]);  // the first batch's good copy did not run either
  this->sync_all();  // the twin counts mismatches when its streams have run
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  this->copies_->free_event(done);
}

TYPED_TEST(StorageCopiesTest, TheDefaultStreamCanBeTheOneABatchIsOrderedAfter) {
  const std::size_t n = this->chunk();
  const std::uintptr_t a = this->block(), b = this->block();
  this->sync_all();
  this->dev_->fill(a, n, 11, 0, 20ms);  // handle 0: CUDA's default stream, not "no stream"
  const EventHandle done = this->copies_->new_event();
  const StorageCopy ab{b, a, n};
  this->copies_->copy(StreamHandle{0}, this->streams_[1], {}, std::span(&ab, 1), done);
  this->copies_->wait(this->streams_[2], done);
  this->dev_->check(b, n, 11, this->streams_[2]);
  this->sync_all();  // the twin counts mismatches when its streams have run
  EXPECT_EQ(this->dev_->take_mismatches(), 0u);
  this->copies_->free_event(done);
}


// A backend that makes "its device's context" current on every call, as the CUDA backend does (bind()), over the twin.
class BindingBackend final : public VmmBackend {
 public:
  static constexpr std::uintptr_t kDeviceContext = 0xD0;
  static thread_local std::uintptr_t current;

  const BackendInfo& info() const noexcept override { return twin_.info(); }
  std::uintptr_t reserve(std::size_t bytes) override { return bind(), twin_.reserve(bytes); }
  void unreserve(std::uintptr_t va, std::size_t bytes) noexcept override { twin_.unreserve(va, bytes); }
  PhysHandle create(Residence where, std::size_t bytes) override { return bind(), twin_.create(where, bytes); }
  void release(PhysHandle h) noexcept override { twin_.release(h); }
  void map(std::uintptr_t va, PhysHandle h) override { bind(), twin_.map(va, h); }
  void unmap(std::uintptr_t va, std::size_t bytes) override { bind(), twin_.unmap(va, bytes); }
  StreamHandle create_stream() override { return bind(), twin_.create_stream(); }
  void destroy_stream(StreamHandle s) noexcept override { twin_.destroy_stream(s); }
  EventHandle create_event() override { return bind(), twin_.create_event(); }
  void destroy_event(EventHandle e) noexcept override { bind(), twin_.destroy_event(e); }
  void record(EventHandle e, StreamHandle s) override { bind(), twin_.record(e, s); }
  bool query(EventHandle e) override { return bind(), twin_.query(e); }
  void synchronize(EventHandle e) override { bind(), twin_.synchronize(e); }
  void wait(StreamHandle s, EventHandle e) override { bind(), twin_.wait(s, e); }
  void synchronize_stream(StreamHandle s) override { bind(), twin_.synchronize_stream(s); }
  void copy_async(std::uintptr_t dst, std::uintptr_t src, std::size_t bytes, StreamHandle s) override {
    bind(), twin_.copy_async(dst, src, bytes, s);
  }
  void checksum_async(std::uintptr_t va, std::size_t bytes, std::size_t stride, std::uint64_t* out,
                      StreamHandle s) override {
    bind(), twin_.checksum_async(va, bytes, stride, out, s);
  }
  std::uint64_t* host_words(std::size_t n) override { return twin_.host_words(n); }
  GateHandle close_gate(StreamHandle s) override { return bind(), twin_.close_gate(s); }
  bool gate_reached(GateHandle g) override { return twin_.gate_reached(g); }
  void open_gate(GateHandle g) noexcept override { twin_.open_gate(g); }
  void read(void* dst, std::uintptr_t src, std::size_t bytes) override { twin_.read(dst, src, bytes); }
  void write(std::uintptr_t dst, const void* src, std::size_t bytes) override { twin_.write(dst, src, bytes); }
  std::uintptr_t current_context() override { return current; }
  void set_current_context(std::uintptr_t ctx) override { current = ctx; }

 private:
  static void bind() { current = kDeviceContext; }
  MemfdBackend twin_;
};
thread_local std::uintptr_t BindingBackend::current = 0;

TEST(StorageCopiesContext, EveryCallLeavesTheCallersContextCurrent) {
  BindingBackend backend;
  const std::uintptr_t callers = 0xC1;  // a thread driving another device (torch's current device is not the copies')
  BindingBackend::current = callers;
  StorageCopies copies(backend);
  EXPECT_EQ(BindingBackend::current, callers) << "making the fence event";
  std::vector<std::uint64_t> a(64, 7), b(64, 0);
  const EventHandle done = copies.new_event();
  EXPECT_EQ(BindingBackend::current, callers) << "new_event";
  const StorageCopy c{reinterpret_cast<std::uintptr_t>(b.data()), reinterpret_cast<std::uintptr_t>(a.data()),
                      a.size() * sizeof(a[0])};
  copies.copy(StreamHandle{0}, StreamHandle{0}, {}, std::span(&c, 1), done);
  EXPECT_EQ(BindingBackend::current, callers) << "copy";
  copies.wait(StreamHandle{0}, done);
  EXPECT_EQ(BindingBackend::current, callers) << "wait";
  copies.synchronize(done);
  EXPECT_TRUE(copies.done(done));
  EXPECT_EQ(BindingBackend::current, callers) << "done";
  EXPECT_EQ(b, a);
  copies.free_event(done);
  EXPECT_EQ(BindingBackend::current, callers) << "free_event";
  const EventHandle more = copies.new_event();
  BindingBackend::current = 0;  // a thread with no context keeps the device's (nothing to give back)
  EXPECT_TRUE(copies.done(more));
  EXPECT_EQ(BindingBackend::current, BindingBackend::kDeviceContext);
  copies.free_event(more);
}

}  // namespace
}  // namespace tierpack::gpu::testing
