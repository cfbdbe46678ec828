// Versioned, checksummed file envelope (see file_envelope.hpp).
#include "core/file_envelope.hpp"

#include <array>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace tierpack {

std::uint32_t crc32(std::string_view data) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

void write_file_atomic(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw os_error("open " + tmp + " for writing", errno ? errno : EIO);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      const int err = errno ? errno : EIO;
      std::remove(tmp.c_str());
      throw os_error("write " + tmp, err);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw os_error("rename " + tmp + " to " + path, err);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw os_error("open " + path, errno ? errno : ENOENT);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_envelope(const std::string& path, std::string_view format, int version, std::string_view payload) {
  char header[128];
  std::snprintf(header, sizeof header, "%.*s %d %zu %08x\n", int(format.size()), format.data(), version,
                payload.size(), crc32(payload));
  std::string content(header);
  content.append(payload);
  write_file_atomic(path, content);
}

std::string read_envelope(const std::string& path, std::string_view format, int max_version, int* version) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw os_error("open " + path, errno ? errno : ENOENT);
  std::string header;
  if (!std::getline(in, header) || header.size() > 200)
    throw format_error(path + ": not a " + std::string(format) + " file (no header line)");
  std::istringstream hs(header);
  std::string fmt;
  long long ver = -1, len = -1;
  std::string crc_hex;
  hs >> fmt >> ver >> len >> crc_hex;
  if (fmt != format) throw format_error(path + ": not a " + std::string(format) + " file (header '" + header.substr(0, 60) + "')");
  if (!hs || ver < 1 || len < 0 || crc_hex.size() != 8)
    throw format_error(path + ": corrupt " + std::string(format) + " header '" + header.substr(0, 60) + "'");
  if (ver > max_version)
    throw format_error(path + ": " + std::string(format) + " version " + std::to_string(ver) +
                       " is newer than this tierpack reads (up to " + std::to_string(max_version) + "); upgrade tierpack");
  std::string payload(static_cast<std::size_t>(len), '\0');
  in.read(payload.data(), len);
  if (in.gcount() != len)
    throw format_error(path + ": truncated: header promises " + std::to_string(len) + " bytes, file has " +
                       std::to_string(in.gcount()));
  if (in.peek() != std::char_traits<char>::eof())
    throw format_error(path + ": corrupt: extra bytes after the " + std::to_string(len) + "-byte payload");
  char want[16];
  std::snprintf(want, sizeof want, "%08x", crc32(payload));
  if (crc_hex != want) throw format_error(path + ": corrupt: checksum " + crc_hex + " does not match contents (" + want + ")");
  if (version) *version = static_cast<int>(ver);
  return payload;
}

}  // namespace tierpack
