// tierpack error family.
//
// Every failure inside tierpack's C++ code is reported as one of these exceptions. The C ABI edges
// (the PyTorch pluggable allocator, preload hooks, signal handlers) catch them and report; nothing in
// the library aborts on its own. Deallocation paths are noexcept and never throw these.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace tierpack {

/// Base of all tierpack exceptions.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A precondition or invariant was violated, or user input (file, flag, config) is invalid.
class logic_error : public error {
 public:
  using error::error;
};

/// A file (profile, plan, tier model) could not be read: unknown version, truncated, corrupt.
class format_error : public logic_error {
 public:
  using logic_error::logic_error;
};

/// A tier ran out of memory (or out of its budget).
class out_of_memory : public error {
 public:
  out_of_memory(std::size_t requested, std::string tier, std::size_t free_bytes, std::string detail = {});
  std::size_t requested() const noexcept { return requested_; }
  const std::string& tier() const noexcept { return tier_; }
  std::size_t free_bytes() const noexcept { return free_; }

 private:
  std::size_t requested_;
  std::string tier_;
  std::size_t free_;
};

/// How an errno reads in messages: "Cannot allocate memory (errno 12)" (os_error's what() among them).
std::string errno_text(int err);

/// An operating-system call failed; carries errno.
class os_error : public error {
 public:
  os_error(std::string call, int err);
  int code() const noexcept { return errno_; }

 private:
  int errno_;
};

/// A CUDA runtime or driver call failed; carries the CUDA status code.
class cuda_error : public error {
 public:
  cuda_error(std::string call, int status, std::string status_name);
  int code() const noexcept { return status_; }

 private:
  int status_;
};

namespace detail {
[[noreturn]] void throw_logic_error(const char* cond, const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace tierpack

/// Checks a precondition; throws tierpack::logic_error naming the condition when it is false.
#define TIERPACK_EXPECTS(cond, msg)                                             \
  do {                                                                          \
    if (!(cond)) ::tierpack::detail::throw_logic_error(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
