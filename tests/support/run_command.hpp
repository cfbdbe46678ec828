// Running a shell command from a test: its exit status and its stdout and stderr together, for tests
// that drive `tierpack`, Python scripts or example programs end to end.
#pragma once

#include <sys/wait.h>

#include <cstdio>
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

}  // namespace tierpack::testing
