// The envelope around tierpack's data files: a one-line header naming the format, its version, the
// payload length and a CRC-32 of the payload, then the JSON payload. It turns truncation,
// corruption and version skew into one-line format_errors before any parsing happens.
// Layout: docs/formats.md ("Envelope").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tierpack {

std::uint32_t crc32(std::string_view data);

/// Writes content to path atomically (temp file + rename). Throws os_error.
void write_file_atomic(const std::string& path, std::string_view content);
/// Reads a whole file. Throws os_error when it cannot be opened.
std::string read_file(const std::string& path);

/// Writes "<format> <version> <length> <crc32-hex>\n<payload>" to path (atomically: temp + rename).
void write_envelope(const std::string& path, std::string_view format, int version, std::string_view payload);

/// Reads path, checks the header against `format`, `max_version`, length and CRC; returns the payload
/// and stores the file's version. Throws os_error (cannot open) or format_error (anything else).
std::string read_envelope(const std::string& path, std::string_view format, int max_version, int* version = nullptr);

/// The checks of read_envelope on a file's bytes already in memory; `name` starts error messages.
/// Throws format_error.
std::string_view parse_envelope(std::string_view content, std::string_view name, std::string_view format, int max_version,
                                int* version = nullptr);

}  // namespace tierpack
