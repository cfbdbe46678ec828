// The envelope around tierpack's data files: a one-line header naming the format, its version, the
// payload length and a CRC-32 of the payload, then the JSON payload. It turns truncation,
// corruption and version skew into one-line format_errors before any parsing happens.
// Layout: docs/formats.md ("Envelope").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/input_file.hpp"

namespace tierpack {

/// Longest header line an envelope may have.
inline constexpr std::size_t kMaxEnvelopeHeaderBytes = 200;

std::uint32_t crc32(std::string_view data);

/// Writes content to path atomically (temp file + rename). Throws os_error.
void write_file_atomic(const std::string& path, std::string_view content);
/// Writes "<format> <version> <length> <crc32-hex>\n<payload>" to path (atomically: temp + rename).
void write_envelope(const std::string& path, std::string_view format, int version, std::string_view payload);

/// Reads path, checks the header against `format`, `max_version`, length and CRC; returns the payload
/// and stores the file's version. The header is read first; the payload must be no longer than
/// max_payload_bytes and exactly fill the rest of the file, so at most the declared length is read
/// (Note [Bounded reads]). Throws os_error (cannot open) or format_error (anything else).
std::string read_envelope(const std::string& path, std::string_view format, int max_version, int* version = nullptr,
                          std::uint64_t max_payload_bytes = kMaxJsonFileBytes);

/// The checks of read_envelope on a file's bytes already in memory; `name` starts error messages.
/// Throws format_error.
std::string_view parse_envelope(std::string_view content, std::string_view name, std::string_view format, int max_version,
                                int* version = nullptr);

}  // namespace tierpack
