// Streamed, atomically published files (see file_sink.hpp).
#include "report/detail/file_sink.hpp"

#include <cerrno>

#include "core/error.hpp"

namespace tierpack::report::detail {

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (!file_) throw os_error("open " + tmp_ + " for writing", errno ? errno : EIO);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_) {
    std::fclose(file_);
    std::remove(tmp_.c_str());
  }
}

void AtomicFileWriter::write(std::string_view data) {
  if (data.empty()) return;
  if (std::fwrite(data.data(), 1, data.size(), file_) != data.size()) throw os_error("write " + tmp_, errno ? errno : EIO);
  bytes_ += data.size();
}

void AtomicFileWriter::commit() {
  std::FILE* f = file_;
  file_ = nullptr;
  if (std::fclose(f) != 0) {
    const int err = errno ? errno : EIO;
    std::remove(tmp_.c_str());
    throw os_error("close " + tmp_, err);
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp_.c_str());
    throw os_error("rename " + tmp_ + " to " + path_, err);
  }
}

}  // namespace tierpack::report::detail
