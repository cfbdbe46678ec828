// Bounded reads of the files a user names (profiles, plans, run statistics, tier models): the one place
// that opens them. Only regular files are read; a FIFO, a character device (/dev/zero) or a directory is
// refused before a byte is read, and no read goes past a size limit, so a bad path can neither block
// nor fill memory. Note [Bounded reads].
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tierpack {

// Note [Bounded reads]
// ~~~~~~~~~~~~~~~~~~~~
// Every file a user names is opened with O_NONBLOCK (opening a FIFO without a writer would block)
// and checked with fstat on the open descriptor: anything but a regular file is a format_error naming
// the path and what it is. Its size is then known, so nothing reads more than min(size, limit) bytes,
// and a file larger than its kind's limit is refused without reading it. An enveloped file
// (core/file_envelope.hpp) reads its header line first (at most kMaxEnvelopeHeaderBytes) and
// then exactly the payload length the header declares, which must match the file's size.

/// Largest profile payload tierpack reads (a profile of ~10 million tensors).
inline constexpr std::uint64_t kMaxProfileBytes = 4ull << 30;
/// Largest plan, run-statistics or trace file (JSON).
inline constexpr std::uint64_t kMaxJsonFileBytes = 1ull << 30;
/// Largest tier-model file (a few tiers and links).
inline constexpr std::uint64_t kMaxTierModelBytes = 16ull << 20;

/// A regular file opened for reading (Note [Bounded reads]). Move-only.
class InputFile {
 public:
  /// Opens path. Throws os_error when it cannot be opened, format_error when it is not a regular
  /// file or is larger than max_bytes.
  InputFile(const std::string& path, std::uint64_t max_bytes);
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&&) = delete;
  ~InputFile();

  const std::string& path() const noexcept { return path_; }
  /// The file's size when it was opened.
  std::uint64_t size() const noexcept { return size_; }
  /// Reads up to n bytes from the current position (fewer only at the end of the file). Throws os_error.
  std::string read(std::uint64_t n);
  /// Reads what one read(2) gives, at most n bytes into buf; 0 at the end of the file. Throws os_error.
  std::size_t read_some(char* buf, std::size_t n);

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

/// Reads a whole regular file of at most max_bytes (Note [Bounded reads]). Throws os_error (cannot
/// open or read) or format_error (not a regular file, too large).
std::string read_file(const std::string& path, std::uint64_t max_bytes = kMaxJsonFileBytes);

}  // namespace tierpack
