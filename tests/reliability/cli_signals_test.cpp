// `tierpack profile` / `tierpack run` and signals (issue 26, "processes and signals"; Note [Signals to
// tierpack] in integrations/cli/child_launch.cpp): a SIGINT sent to tierpack alone reaches the command, a
// killed tierpack leaves no orphan training on, the run's own statistics file is in a private directory
// that is gone afterwards, and a command that fails before tierpack wrote anything is reported as such.
// Each waits at most 20 s for what it expects, then kills what it started.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/run_command.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

class CliSignals : public ::testing::Test {
 protected:
  void SetUp() override {
    // tierpack launches a command only with its torch integration built (not in the sanitizer builds).
    if (!fs::exists(fs::path(TIERPACK_BINARY_DIR) / "lib" / "libtierpack_torch.so"))
      GTEST_SKIP() << "libtierpack_torch.so not built: tierpack cannot launch a command here";
    dir_ = fs::temp_directory_path() / ("tierpack_cli_signals_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (dir_.empty()) return;
    if (const pid_t child = read_pid(); child > 0) ::kill(child, SIGKILL);
    fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  /// Starts `tierpack ARGS -- sh -c SCRIPT` in the test's directory, in the background.
  void start(const std::string& args, const std::string& script) {
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      if (::chdir(dir_.c_str()) != 0) ::_exit(126);
      const std::string bin = std::string(TIERPACK_BINARY_DIR) + "/bin/tierpack";
      std::vector<std::string> argv{bin};
      std::istringstream words(args);
      for (std::string w; words >> w;) argv.push_back(w);
      for (const char* w : {"--", "/bin/sh", "-c"}) argv.emplace_back(w);
      argv.push_back(script);
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      ::freopen((dir_ / "stderr.txt").c_str(), "w", stderr);
      ::execv(bin.c_str(), cargv.data());
      ::_exit(127);
    }
  }
  pid_t read_pid() const {
    std::ifstream in(dir_ / "PID");
    pid_t p = 0;
    in >> p;
    return p;
  }
  /// The command's pid once its script wrote it (0 after 20 s).
  pid_t wait_for_command() const {
    for (auto until = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < until;) {
      if (const pid_t p = read_pid(); p > 0) return p;
      std::this_thread::sleep_for(20ms);
    }
    return 0;
  }
  /// tierpack's exit status once it ended, or -1 if it still runs after 20 s.
  int wait_for_tierpack() {
    for (auto until = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < until;) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(20ms);
    }
    return -1;
  }
  static bool gone(pid_t p) {
    std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
    if (!stat) return true;
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';  // a zombie is gone too
  }
  std::string stderr_text() const {
    std::ifstream in(dir_ / "stderr.txt");
    return {std::istreambuf_iterator<char>(in), {}};
  }

  fs::path dir_;
  pid_t pid_ = 0;
};

// The command loops until a SIGINT makes it leave a mark and exit.
constexpr const char* kLoopUntilInt = "trap 'touch INT_MARK; exit 3' INT; echo $$ > PID; while :; do :; done";

TEST_F(CliSignals, ASigintSentToTierpackAloneReachesTheCommand) {
  start("profile -o run.tpk", kLoopUntilInt);
  ASSERT_GT(wait_for_command(), 0) << stderr_text();
  ASSERT_EQ(::kill(pid_, SIGINT), 0);
  const int status = wait_for_tierpack();
  EXPECT_NE(status, -1) << "tierpack still runs 20 s after a SIGINT (it was not passed on): " << stderr_text();
  EXPECT_TRUE(fs::exists(dir_ / "INT_MARK")) << stderr_text();
}

TEST_F(CliSignals, AKilledTierpackLeavesNoOrphanCommand) {
  start("profile -o run.tpk", "echo $$ > PID; while :; do :; done");
  const pid_t command = wait_for_command();
  ASSERT_GT(command, 0) << stderr_text();
  ASSERT_EQ(::kill(pid_, SIGKILL), 0);
  ::waitpid(pid_, nullptr, 0);
  pid_ = 0;
  bool ended = false;
  for (auto until = std::chrono::steady_clock::now() + 20s; !ended && std::chrono::steady_clock::now() < until;) {
    ended = gone(command);
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(ended) << "the command still runs 20 s after tierpack was killed";
}

TEST_F(CliSignals, TheRunsOwnStatisticsLiveInAPrivateDirectoryAndAFailedCommandIsSaidSo) {
  // The command records where tierpack asked for statistics, then fails before writing any.
  start("run --tiers preset:ddr5-cxl --fast-budget 50%", "echo $$ > PID; echo \"$TIERPACK_CONF\" > CONF; exit 5");
  ASSERT_GT(wait_for_command(), 0) << stderr_text();
  const pid_t tierpack = pid_;
  EXPECT_EQ(wait_for_tierpack(), 5) << stderr_text();
  std::ifstream in(dir_ / "CONF");
  std::string conf;
  std::getline(in, conf);
  const auto at = conf.find("stats_out:");
  ASSERT_NE(at, std::string::npos) << conf;
  std::string stats = conf.substr(at + 10);
  stats = stats.substr(0, stats.find(','));
  const fs::path dir = fs::path(stats).parent_path();
  EXPECT_EQ(dir.filename().string().rfind("tierpack-run-", 0), 0u) << stats;
  EXPECT_EQ(dir.filename().string().find(std::to_string(tierpack)), std::string::npos) << "a guessable name: " << stats;
  EXPECT_FALSE(fs::exists(dir)) << "the private directory stays behind: " << dir;
  const std::string err = stderr_text();
  EXPECT_NE(err.find("the command ended with exit status 5 first"), std::string::npos) << err;
  EXPECT_EQ(err.find("not enabled"), std::string::npos) << err;
}

}  // namespace
