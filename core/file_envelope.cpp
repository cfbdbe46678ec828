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
  const std::string content = read_file(path);
  return std::string(parse_envelope(content, path, format, max_version, version));
}

std::string_view parse_envelope(std::string_view content, std::string_view name, std::string_view format, int max_version,
                                int* version) {
  const std::string path(name);
  const std::size_t eol = content.find('\n');
  const std::string header(content.substr(0, eol));
  if (content.empty() || header.size() > 200)
    throw format_error(path + ": not a " + std::string(format) + " file (no header line)");
  const std::string_view rest = eol == std::string_view::npos ? std::string_view() : content.substr(eol + 1);
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
  // Compare before taking anything: a corrupt header may promise more bytes than memory holds.
  const auto want = static_cast<unsigned long long>(len);
  if (rest.size() < want)
    throw format_error(path + ": truncated: header promises " + std::to_string(len) + " bytes, file has " +
                       std::to_string(rest.size()));
  if (rest.size() > want)
    throw format_error(path + ": corrupt: extra bytes after the " + std::to_string(len) + "-byte payload");
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08x", crc32(rest));
  if (crc_hex != crc) throw format_error(path + ": corrupt: checksum " + crc_hex + " does not match contents (" + crc + ")");
  if (version) *version = static_cast<int>(ver);
  return rest;
}

}  // namespace tierpack
