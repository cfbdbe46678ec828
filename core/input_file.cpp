// Bounded reads of user-named files (see input_file.hpp, Note [Bounded reads]).
#include "core/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/error.hpp"
#include "core/units.hpp"

namespace tierpack {
namespace {

std::string_view file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

InputFile::InputFile(const std::string& path, std::uint64_t max_bytes) : path_(path) {
  // O_NONBLOCK: opening a FIFO that has no writer must not wait for one.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd_ < 0) throw os_error("open " + path, errno);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw os_error("stat " + path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw format_error(path + ": is " + std::string(file_kind(st.st_mode)) +
                       ", not a regular file; tierpack reads only regular files");
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
  if (size_ > max_bytes) {
    ::close(fd_);
    throw format_error(path + ": " + format_bytes(size_) + " is larger than the " + format_bytes(max_bytes) +
                       " tierpack reads from a file of this kind");
  }
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
}

InputFile::InputFile(InputFile&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::size_t InputFile::read_some(char* buf, std::size_t n) {
  for (;;) {
    const ssize_t got = ::read(fd_, buf, n);
    if (got >= 0) return static_cast<std::size_t>(got);
    if (errno != EINTR) throw os_error("read " + path_, errno);
  }
}

std::string InputFile::read(std::uint64_t n) {
  std::string out;
  // No more than the file holds: a corrupt length asked for must not allocate.
  out.reserve(static_cast<std::size_t>(std::min(n, size_)));
  char buf[1 << 16];
  while (out.size() < n) {
    const std::size_t got =
        read_some(buf, static_cast<std::size_t>(std::min<std::uint64_t>(sizeof buf, n - out.size())));
    if (got == 0) break;
    out.append(buf, got);
  }
  return out;
}

std::string read_file(const std::string& path, std::uint64_t max_bytes) {
  InputFile in(path, max_bytes);
  const std::string content = in.read(max_bytes + 1);  // one more: a file that grew past the limit since fstat
  if (content.size() > max_bytes)
    throw format_error(path + ": larger than the " + format_bytes(max_bytes) +
                       " tierpack reads from a file of this kind");
  return content;
}

}  // namespace tierpack
