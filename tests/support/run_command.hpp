// Running a shell command from a test: its exit status and its stdout and stderr together, for tests
// that drive `tierpack`, Python scripts or example programs end to end.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace tierpack::testing {

struct Proc {
  int status = -1;     ///< exit status, 128 + signal when killed, -1 when it could not start
  std::string output;  ///< stdout and stderr, interleaved
};

inline Proc run(const std::string& cmd) {
  Proc r;
  FILE* f = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return r;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) r.output.append(buf, n);
  const int st = ::pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

/// A command's exit status with its stdout and stderr apart (for checking that an error is one line
/// on stderr). `scratch_dir` holds the two capture files.
struct CliRun {
  int status = -1;
  std::string out, err;
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline CliRun run_split(const std::string& cmd, const std::string& scratch_dir) {
  const std::string out = scratch_dir + "/stdout", err = scratch_dir + "/stderr";
  const int raw = std::system((cmd + " >" + out + " 2>" + err).c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_text(out), read_text(err)};
}

}  // namespace tierpack::testing
