// GoogleTest checks for a `tierpack` run (tests/support/run_command.hpp): bad input gives one line on stderr,
// starting with the program's name, naming what was wrong, with the expected exit status (2 usage, 1 failure).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tests/support/run_command.hpp"

namespace tierpack::testing {

inline void expect_one_line_error(const CliRun& r, int status, const std::string& fragment) {
  EXPECT_EQ(r.status, status) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("tierpack", 0), 0u) << "starts with the program name: " << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << "names '" << fragment << "': " << r.err;
}

}  // namespace tierpack::testing
