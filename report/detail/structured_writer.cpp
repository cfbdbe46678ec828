// JSON text and pickle encodings of the report's streamed documents (see structured_writer.hpp).
#include "report/detail/structured_writer.hpp"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "report/detail/file_sink.hpp"
#include "report/detail/text.hpp"

namespace tierpack::report::detail {

void StructuredWriter::flush() {
  sink_->write(out_);
  out_.clear();
}

void StructuredWriter::finish() {
  if (sink_) flush();
}

// ---- JSON ----------------------------------------------------------------------------------------
void JsonTextWriter::before_value() {
  maybe_flush();
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (stack_.empty()) return;
  auto& top = stack_.back();
  if (!top.first) out_ += ',';
  if (top.array && stack_.size() <= 2) out_ += '\n';
  top.first = false;
}

void JsonTextWriter::quoted(std::string_view s) {
  out_ += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\n': out_ += "\\n"; break;
      case '\r': out_ += "\\r"; break;
      case '\t': out_ += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out_ += buf;
        } else {
          out_ += static_cast<char>(c);
        }
    }
  }
  out_ += '"';
}

void JsonTextWriter::begin_object() {
  before_value();
  out_ += '{';
  stack_.push_back({false, true});
}
void JsonTextWriter::end_object() {
  stack_.pop_back();
  out_ += '}';
}
void JsonTextWriter::begin_array() {
  before_value();
  out_ += '[';
  stack_.push_back({true, true});
}
void JsonTextWriter::end_array() {
  const bool newline = stack_.size() <= 2 && !stack_.back().first;
  stack_.pop_back();
  if (newline) out_ += '\n';
  out_ += ']';
}
void JsonTextWriter::key(std::string_view k) {
  before_value();
  quoted(k);
  out_ += ':';
  after_key_ = true;
}
void JsonTextWriter::str(std::string_view s) {
  before_value();
  quoted(s);
}
void JsonTextWriter::i64(std::int64_t v) {
  before_value();
  char buf[24];
  out_.append(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, v).ptr - buf));
}
void JsonTextWriter::u64(std::uint64_t v) {
  before_value();
  char buf[24];
  out_.append(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, v).ptr - buf));
}
void JsonTextWriter::f64(double v) {
  before_value();
  out_ += json_number(v, decimals_);
}
void JsonTextWriter::boolean(bool v) {
  before_value();
  out_ += v ? "true" : "false";
}
void JsonTextWriter::null() {
  before_value();
  out_ += "null";
}

// ---- pickle --------------------------------------------------------------------------------------
namespace {
constexpr char kProto = '\x80', kStop = '.', kMark = '(', kEmptyDict = '}', kEmptyList = ']', kSetItems = 'u',
               kAppends = 'e', kBinInt = 'J', kBinInt1 = 'K', kBinInt2 = 'M', kLong1 = '\x8a', kShortBinUnicode = '\x8c',
               kBinUnicode = 'X', kBinFloat = 'G', kNewTrue = '\x88', kNewFalse = '\x89', kNone = 'N';
constexpr std::uint32_t kBatch = 1000;  // items per APPENDS / pairs per SETITEMS

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
}  // namespace

PickleWriter::PickleWriter() {
  out_ += kProto;
  out_ += '\x04';
}

void PickleWriter::item_done() {
  maybe_flush();
  if (stack_.empty()) return;
  auto& top = stack_.back();
  ++top.batch;
  const std::uint32_t limit = top.dict ? 2 * kBatch : kBatch;
  if (top.batch >= limit) {  // dict batches flush after a value, never between a key and its value
    out_ += top.dict ? kSetItems : kAppends;
    out_ += kMark;
    top.batch = 0;
  }
}

void PickleWriter::begin(char empty_opcode, bool dict) {
  out_ += empty_opcode;
  out_ += kMark;
  stack_.push_back({dict, 0});
}

void PickleWriter::end() {
  out_ += stack_.back().dict ? kSetItems : kAppends;
  stack_.pop_back();
  if (stack_.empty()) out_ += kStop;  // the document (one top-level container) is complete
  item_done();
}

void PickleWriter::begin_object() { begin(kEmptyDict, true); }
void PickleWriter::end_object() { end(); }
void PickleWriter::begin_array() { begin(kEmptyList, false); }
void PickleWriter::end_array() { end(); }
void PickleWriter::key(std::string_view k) { str(k); }

void PickleWriter::str(std::string_view s) {
  if (s.size() < 256) {
    out_ += kShortBinUnicode;
    out_ += static_cast<char>(s.size());
  } else {
    out_ += kBinUnicode;
    put_le(out_, s.size(), 4);
  }
  out_.append(s);
  item_done();
}

void PickleWriter::i64(std::int64_t v) {
  if (v >= 0 && v < 256) {
    out_ += kBinInt1;
    put_le(out_, static_cast<std::uint64_t>(v), 1);
  } else if (v >= 0 && v < 65536) {
    out_ += kBinInt2;
    put_le(out_, static_cast<std::uint64_t>(v), 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    out_ += kBinInt;
    put_le(out_, static_cast<std::uint64_t>(v), 4);
  } else {
    // LONG1: little-endian two's complement, as few bytes as keep the sign right.
    int n = 8;
    const auto u = static_cast<std::uint64_t>(v);
    while (n > 1) {
      const std::uint64_t top = (u >> (8 * (n - 1))) & 0xff, next_sign = (u >> (8 * (n - 1) - 1)) & 1;
      if ((top == 0 && next_sign == 0) || (top == 0xff && next_sign == 1)) --n;
      else break;
    }
    out_ += kLong1;
    out_ += static_cast<char>(n);
    put_le(out_, u, n);
  }
  item_done();
}

void PickleWriter::u64(std::uint64_t v) {
  if (v <= static_cast<std::uint64_t>(INT64_MAX)) {
    i64(static_cast<std::int64_t>(v));
    return;
  }
  out_ += kLong1;
  out_ += '\x09';  // a ninth, zero byte keeps it positive
  put_le(out_, v, 8);
  out_ += '\0';
  item_done();
}

void PickleWriter::f64(double v) {
  out_ += kBinFloat;
  const auto bits = std::bit_cast<std::uint64_t>(v);
  for (int i = 7; i >= 0; --i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);  // big-endian
  item_done();
}

void PickleWriter::boolean(bool v) {
  out_ += v ? kNewTrue : kNewFalse;
  item_done();
}

void PickleWriter::null() {
  out_ += kNone;
  item_done();
}


}  // namespace tierpack::report::detail
