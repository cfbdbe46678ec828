// A file written in pieces and published atomically (temp file + rename), so the report's large
// outputs stream to disk instead of growing one huge string. Private to report/.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace tierpack::report::detail {

class AtomicFileWriter {
 public:
  /// Opens `<path>.tmp`; throws os_error.
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();  ///< removes the temp file unless commit() ran
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::string_view data);  ///< throws os_error
  /// Closes and renames the temp file to the path; throws os_error.
  void commit();
  std::uint64_t bytes() const { return bytes_; }

 private:
  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
  std::uint64_t bytes_ = 0;
};

}  // namespace tierpack::report::detail
