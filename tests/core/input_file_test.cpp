// Bounded reads (core/input_file.hpp, Note [Bounded reads]): a FIFO, a device or a directory is
// refused before anything is read (no blocking, no endless read of /dev/zero); no read goes past the
// size limit or, for an enveloped file, past the payload length its header declares.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/file_envelope.hpp"
#include "core/input_file.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/run_stats.hpp"
#include "core/tier_spec.hpp"

using namespace tierpack;
namespace fs = std::filesystem;

namespace {

class InputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tierpack_input_file_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string fifo() const {
    const std::string p = path("fifo");
    if (!fs::exists(p)) {
      EXPECT_EQ(::mkfifo(p.c_str(), 0600), 0);
    }
    return p;
  }
  void spit(const std::string& p, const std::string& data) const {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << data;
  }
  template <class F>
  static std::string error_of(F&& f) {
    try {
      f();
    } catch (const error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(InputFileTest, RefusesFifosDevicesAndDirectoriesByName) {
  // Each of these blocked (FIFO without a writer) or read until memory ran out (/dev/zero) before.
  for (const std::string& p : {fifo(), std::string("/dev/zero"), dir_.string()}) {
    SCOPED_TRACE(p);
    for (const std::string& msg :
         {error_of([&] { read_profile(p); }), error_of([&] { read_plan(p); }), error_of([&] { read_run_stats(p); }),
          error_of([&] { read_tier_model(p); }), error_of([&] { read_file(p); })}) {
      EXPECT_NE(msg.find(p + ": is a"), std::string::npos) << msg;
      EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
    }
  }
  // --tiers FILE takes the file path too: a FIFO is refused, not parsed as a spec or waited on.
  EXPECT_NE(error_of([&] { load_tier_model(fifo()); }).find("not a regular file"), std::string::npos);
}

TEST_F(InputFileTest, RefusesFilesLargerThanTheLimitWithoutReadingThem) {
  const std::string p = path("big.json");
  spit(p, std::string(4096, ' '));
  EXPECT_EQ(read_file(p, 4096).size(), 4096u);
  const std::string msg = error_of([&] { read_file(p, 4095); });
  EXPECT_NE(msg.find("larger than"), std::string::npos) << msg;
  EXPECT_NE(msg.find(p), std::string::npos) << msg;
  // A tier model is a few tiers: a 17 MiB "tier model" is refused by size.
  fs::resize_file(p, 17u << 20);
  EXPECT_NE(error_of([&] { read_tier_model(p); }).find("larger than"), std::string::npos);
}

TEST_F(InputFileTest, EnvelopeDeclaringTooLargeAPayloadIsRefusedBeforeReadingIt) {
  const std::string p = path("huge.tpk");
  // A valid-looking header that promises 2^62 bytes: refused by the limit, not by allocating.
  spit(p, "tierpack-profile 1 4611686018427387904 00000000\n{}");
  std::string msg = error_of([&] { read_profile(p); });
  EXPECT_NE(msg.find("header declares"), std::string::npos) << msg;
  // The declared length must match the file's size (checked before reading the payload).
  spit(p, "tierpack-profile 1 1000 00000000\n{}");
  msg = error_of([&] { read_profile(p); });
  EXPECT_NE(msg.find("truncated: header promises 1000 bytes, file has 2"), std::string::npos) << msg;
  spit(p, "tierpack-profile 1 1 00000000\n{}");
  msg = error_of([&] { read_profile(p); });
  EXPECT_NE(msg.find("extra bytes"), std::string::npos) << msg;
  // No header line within the first 200 bytes: not read further.
  spit(p, std::string(1000, 'x'));
  msg = error_of([&] { read_profile(p); });
  EXPECT_NE(msg.find("no header line"), std::string::npos) << msg;
}

TEST_F(InputFileTest, EnvelopeRoundTripsThroughTheBoundedReader) {
  const std::string p = path("ok.env");
  for (std::size_t n : {std::size_t{0}, std::size_t{10}, std::size_t{150}, std::size_t{70000}}) {
    const std::string payload(n, 'a');
    write_envelope(p, "tierpack-test", 1, payload);
    int version = 0;
    EXPECT_EQ(read_envelope(p, "tierpack-test", 1, &version), payload) << n;
    EXPECT_EQ(version, 1);
  }
}

}  // namespace
