// Versioned, checksummed file envelope (see file_envelope.hpp).
#include "core/file_envelope.hpp"

#include <algorithm>
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

void write_envelope(const std::string& path, std::string_view format, int version, std::string_view payload) {
  char header[128];
  std::snprintf(header, sizeof header, "%.*s %d %zu %08x\n", int(format.size()), format.data(), version,
                payload.size(), crc32(payload));
  std::string content(header);
  content.append(payload);
  write_file_atomic(path, content);
}

namespace {

struct EnvelopeHeader {
  int version = 0;
  std::uint64_t length = 0;
  std::string crc_hex;
};

// Checks one header line (without its '\n') against `format` and `max_version`.
EnvelopeHeader parse_header(std::string_view line, const std::string& path, std::string_view format, int max_version) {
  const std::string header(line);
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
  return {static_cast<int>(ver), static_cast<std::uint64_t>(len), crc_hex};
}

// The header line at the start of content: what precedes the first '\n', which must come within
// kMaxEnvelopeHeaderBytes.
std::string_view header_line(std::string_view content, const std::string& path, std::string_view format) {
  const std::size_t eol = content.find('\n');
  if (eol == std::string_view::npos || eol > kMaxEnvelopeHeaderBytes)
    throw format_error(path + ": not a " + std::string(format) + " file (no header line)");
  return content.substr(0, eol);
}

// Compare before taking anything: a corrupt header may promise more bytes than memory holds.
void check_length(std::uint64_t have, const EnvelopeHeader& h, const std::string& path) {
  if (have < h.length)
    throw format_error(path + ": truncated: header promises " + std::to_string(h.length) + " bytes, file has " +
                       std::to_string(have));
  if (have > h.length)
    throw format_error(path + ": corrupt: extra bytes after the " + std::to_string(h.length) + "-byte payload");
}

std::string_view check_payload(std::string_view rest, const EnvelopeHeader& h, const std::string& path) {
  check_length(rest.size(), h, path);
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08x", crc32(rest));
  if (h.crc_hex != crc)
    throw format_error(path + ": corrupt: checksum " + h.crc_hex + " does not match contents (" + crc + ")");
  return rest;
}

}  // namespace

std::string read_envelope(const std::string& path, std::string_view format, int max_version, int* version,
                          std::uint64_t max_payload_bytes) {
  InputFile in(path, max_payload_bytes + kMaxEnvelopeHeaderBytes + 1);
  // The header first (Note [Bounded reads]): it says how much more to read.
  const std::string head = in.read(kMaxEnvelopeHeaderBytes + 1);
  const std::string_view line = header_line(head, path, format);
  const EnvelopeHeader h = parse_header(line, path, format, max_version);
  if (h.length > max_payload_bytes)
    throw format_error(path + ": header declares a " + std::to_string(h.length) + "-byte payload, more than the " +
                       std::to_string(max_payload_bytes) + " bytes tierpack reads");
  // The file's size settles truncation and extra bytes before the payload is read.
  const std::uint64_t header_bytes = line.size() + 1, file_payload = in.size() - std::min(in.size(), header_bytes);
  check_length(file_payload, h, path);
  std::string payload = head.substr(header_bytes);
  if (payload.size() <= h.length) payload += in.read(h.length - payload.size() + 1);  // +1: a file that grew since
  check_payload(payload, h, path);
  if (version) *version = h.version;
  return payload;
}

std::string_view parse_envelope(std::string_view content, std::string_view name, std::string_view format,
                                int max_version, int* version) {
  const std::string path(name);
  const std::string_view line = header_line(content, path, format);
  const EnvelopeHeader h = parse_header(line, path, format, max_version);
  const std::string_view rest = check_payload(content.substr(line.size() + 1), h, path);
  if (version) *version = h.version;
  return rest;
}

}  // namespace tierpack
