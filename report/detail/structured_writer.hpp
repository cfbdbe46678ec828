// One interface, two encodings: the report writes its large JSON-shaped outputs (trace.json,
// memory_snapshot.json) as a stream of values instead of building a tree first, and the same code
// emits memory_snapshot.pickle, because pytorch.org/memory_viz reads pickles only. Private to report/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tierpack::report::detail {

class AtomicFileWriter;

class StructuredWriter {
 public:
  virtual ~StructuredWriter() = default;
  /// Streams the encoding to `sink` in chunks (instead of keeping it all in memory); call finish()
  /// once the document is complete.
  void stream_to(AtomicFileWriter* sink) { sink_ = sink; }
  /// Hands what is buffered to the sink (no-op without one).
  void finish();
  virtual void begin_object() = 0;
  virtual void end_object() = 0;
  virtual void begin_array() = 0;
  virtual void end_array() = 0;
  /// Inside an object: the key of the next value.
  virtual void key(std::string_view k) = 0;
  virtual void str(std::string_view s) = 0;
  virtual void i64(std::int64_t v) = 0;
  virtual void u64(std::uint64_t v) = 0;
  virtual void f64(double v) = 0;
  virtual void boolean(bool v) = 0;
  virtual void null() = 0;
  /// The encoded document so far (complete once every container is closed; empty when streamed).
  const std::string& data() const { return out_; }

 protected:
  /// Called between values: passes the buffer on once it is large.
  void maybe_flush() {
    if (sink_ && out_.size() >= kChunk) flush();
  }
  void flush();
  static constexpr std::size_t kChunk = 1 << 20;
  std::string out_;
  AtomicFileWriter* sink_ = nullptr;
};

/// Compact JSON text; a newline after each element of the top two levels of arrays so files stay
/// greppable (one trace event per line). Doubles use up to `decimals` decimals.
class JsonTextWriter final : public StructuredWriter {
 public:
  explicit JsonTextWriter(int decimals = 3) : decimals_(decimals) {}
  void begin_object() override;
  void end_object() override;
  void begin_array() override;
  void end_array() override;
  void key(std::string_view k) override;
  void str(std::string_view s) override;
  void i64(std::int64_t v) override;
  void u64(std::uint64_t v) override;
  void f64(double v) override;
  void boolean(bool v) override;
  void null() override;

 private:
  struct Level {
    bool array;
    bool first;
  };
  void before_value();
  void quoted(std::string_view s);
  std::vector<Level> stack_;
  bool after_key_ = false;
  int decimals_;
};

/// Python pickle, protocol 4 without framing, using only opcodes both CPython's unpickler and
/// memory_viz's JavaScript unpickler understand; containers are filled in batches of 1000 items
/// (as CPython's pickler does) so a reader never spreads a huge argument list. The document must be
/// one container; STOP follows when it closes.
class PickleWriter final : public StructuredWriter {
 public:
  PickleWriter();
  void begin_object() override;
  void end_object() override;
  void begin_array() override;
  void end_array() override;
  void key(std::string_view k) override;
  void str(std::string_view s) override;
  void i64(std::int64_t v) override;
  void u64(std::uint64_t v) override;
  void f64(double v) override;
  void boolean(bool v) override;
  void null() override;

 private:
  void item_done();
  void begin(char empty_opcode, bool dict);
  void end();
  struct Level {
    bool dict;
    std::uint32_t batch;  ///< values (dict: keys + values) since the last MARK
  };
  std::vector<Level> stack_;
};

}  // namespace tierpack::report::detail
