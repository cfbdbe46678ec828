// StorageCopies (the storage mover's batched copies): a batch runs after the work queued on the stream it is
// ordered after and after the events it waits for, in order, and its event covers every copy of it.
#include "migrate/gpu/storage_copies.hpp"

#include <array>
#include <chrono>
#include <optional>

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

}  // namespace
}  // namespace tierpack::gpu::testing
