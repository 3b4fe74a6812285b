// The send stream (zfs send | zfs receive): records, their encoding, a writer and a
// checking reader. The prose spec is docs/format/send.md; this header draws the layout.
//
// A stream is one or more substreams, each BEGIN, then WRITE and FREE records, then END (a
// `send -I` stream holds one substream per snapshot, oldest first). Every record starts
// with a 64-byte header (little-endian):
//
//   off size field
//   --- ---- ------------------------------------------------------------------------
//     0    4 type      1 BEGIN, 2 WRITE, 3 FREE, 4 END
//     4    1 comp      WRITE: Compression of the payload (0 none); else 0
//     5    3 reserved  0
//     8    8 a         BEGIN: magic kStreamMagic | WRITE, FREE: byte offset | END: 0
//    16    8 b         BEGIN: version | WRITE: lsize | FREE: length | END: records before it
//    24    8 plen      payload bytes after the header (WRITE: psize; FREE, END: 0)
//    32   16 cksum     payload's XXH3-128 (0 without one); END: XXH3-128 of every record
//                      header of the substream before END's (each holds its payload's
//                      checksum, so this covers every byte; the data is hashed once)
//    48    8 seq       record number in its substream, BEGIN = 0
//    56    8 hcksum    XXH3-64 of bytes 0..55
//
// BEGIN's payload: u64 features, u64 toguid, u64 fromguid (0: a full stream), u64 volsize,
// u32 volblocksize, u32 reserved, u64 creation (unix seconds), u32 n, then n bytes of JSON
// {"toname": "pool/vol@b", "fromname": "pool/vol@a" or "", "props": {...}} (and, with the
// resume feature, "resume_offset": N; with the compressed feature, "compress": the names of
// the algorithms its WRITE records use, so that a receiver that cannot decode one refuses
// the stream by that name before it writes anything).
//
// A reader checks the magic and version before anything else (a newer stream is refused
// by its version, whatever its header holds), then each header's checksum and sequence
// number, each payload's checksum, and at END the whole substream's: a flipped byte is
// found in the record it hits, a lost, repeated or reordered record at the next header.
//
// Threads: a writer or reader is used by one thread.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "pool/blkptr_format.h"
#include "util/result.h"

namespace volstack::pool {

inline constexpr uint64_t kStreamMagic = 0x4d54535353565356ull;  // "VSVSSSTM"
inline constexpr uint64_t kStreamVersion = 1;
inline constexpr size_t kRecordHeaderSize = 64;
// BEGIN feature bits. A reader refuses a bit it does not know.
inline constexpr uint64_t kFeatureCompressed = 1;  // WRITE payloads may be compressed (-c)
// A resumed stream (send -t): its records start at resume_offset, for a receiver holding
// the partial state of the same stream up to there.
inline constexpr uint64_t kFeatureResume = 2;
inline constexpr uint64_t kKnownFeatures = kFeatureCompressed | kFeatureResume;
// Payloads past these are refused before they are read (a damaged length allocates nothing).
inline constexpr uint64_t kMaxBeginPayload = 1 << 20;
inline constexpr uint64_t kMaxWritePayload = 128 * 1024;

enum class RecordType : uint32_t { kBegin = 1, kWrite = 2, kFree = 3, kEnd = 4 };

struct StreamBegin {
  uint64_t features = 0;
  uint64_t toguid = 0;
  uint64_t fromguid = 0;  // 0: a full stream
  uint64_t volsize = 0;
  uint32_t volblocksize = 0;
  uint64_t creation = 0;
  std::string toname;    // "pool/vol@b"
  std::string fromname;  // "pool/vol@a", empty for a full stream
  std::map<std::string, std::string> props;
  uint64_t resume_offset = 0;  // kFeatureResume: the first volume byte the records cover
  // kFeatureCompressed: the algorithms WRITE payloads may be compressed with, by name.
  std::vector<std::string> compress;
  bool incremental() const { return fromguid != 0; }
  bool resumed() const { return (features & kFeatureResume) != 0; }
};

std::vector<uint8_t> EncodeBeginPayload(const StreamBegin& b);
// A BEGIN whose features this volstack does not know, or whose "compress" names an
// algorithm it cannot decode, is NotSupported (EOPNOTSUPP), naming it; other damage is
// Corruption.
Result<StreamBegin> DecodeBeginPayload(std::span<const uint8_t> in);

// The algorithm a BEGIN's "compress" names (CompressionName's spelling), or NotSupported.
Result<Compression> CompressionByName(const std::string& name);

// Where a partial `zfs receive -s` stopped: what `zfs get receive_resume_token` shows,
// encoded, and `zfs send -t` takes. Token: "1-" then the hex of a JSON object.
struct ResumeState {
  uint64_t toguid = 0, fromguid = 0;
  std::string toname, fromname;
  uint64_t offset = 0;      // the first volume byte not yet received
  bool compressed = false;  // the stream was `send -c`: the resumed one is too
};
std::string EncodeResumeToken(const ResumeState& r);
Result<ResumeState> DecodeResumeToken(const std::string& token);
// As a partial receive's hidden dataset stores it (properties "resume:*"); nullopt-like
// NotFound when `props` hold none.
std::map<std::string, std::string> ResumeProps(const ResumeState& r);
Result<ResumeState> ResumeFromProps(const std::map<std::string, std::string>& props);

// One record as read. WRITE: offset, length = lsize, comp, payload (psize bytes; a
// compressed payload is shorter than lsize and its algorithm one its BEGIN lists). FREE:
// offset, length.
struct StreamRecord {
  RecordType type = RecordType::kEnd;
  Compression comp = Compression::kNone;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::vector<uint8_t> payload;
  StreamBegin begin;  // BEGIN, decoded
};

// Writes records to `sink`. FREE records are coalesced: a FREE adjacent to the previous
// one extends it, and is written out before the next other record.
class StreamWriter {
 public:
  using Sink = std::function<Status(std::span<const uint8_t>)>;
  explicit StreamWriter(Sink sink);
  ~StreamWriter();
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  Status Begin(const StreamBegin& b);
  // `data` is lsize bytes (uncompressed), or psize bytes compressed with `comp`.
  // `cksum`: its XXH3-128 (16 bytes, low half first) when the caller has it already (a
  // block verified against an xxh3 block pointer), else nullptr.
  Status Write(uint64_t offset, uint64_t lsize, std::span<const uint8_t> data,
               Compression comp = Compression::kNone, const uint8_t* cksum = nullptr);
  Status Free(uint64_t offset, uint64_t length);
  Status End();

  uint64_t bytes() const { return bytes_; }  // everything handed to the sink so far
  uint64_t write_records() const { return writes_; }
  uint64_t free_records() const { return frees_; }

 private:
  // `cksum`: the value of the header's cksum field, computed from the payload if nullptr.
  Status Record(RecordType type, Compression comp, uint64_t a, uint64_t b,
                std::span<const uint8_t> payload, const uint8_t* cksum = nullptr);
  Status FlushFree();

  Sink sink_;
  XXH3_state_t* hash_;
  uint64_t seq_ = 0;
  uint64_t bytes_ = 0, writes_ = 0, frees_ = 0;
  uint64_t free_off_ = 0, free_len_ = 0;  // the FREE being coalesced
  std::vector<uint8_t> buf_;
};

// Reads and checks records from `source`, which fills up to n bytes and returns how many
// (0 at the end of the input). Every error is one Status naming the record and the byte
// where the stream went wrong; after one, the reader is done.
class StreamReader {
 public:
  using Source = std::function<Result<size_t>(uint8_t* dst, size_t n)>;
  explicit StreamReader(Source source);
  ~StreamReader();
  StreamReader(const StreamReader&) = delete;
  StreamReader& operator=(const StreamReader&) = delete;

  // The next record, checked. At the end of the input between substreams: ENODATA
  // (`at_end()` true); anywhere else the end of the input is a truncated stream (EUCLEAN).
  Result<StreamRecord> Next();
  bool at_end() const { return at_end_; }
  uint64_t offset() const { return offset_; }  // bytes consumed

 private:
  Result<size_t> Fill(uint8_t* dst, size_t n);  // reads exactly n unless the input ends
  Status Fail(const std::string& why) const;

  Source source_;
  XXH3_state_t* hash_;
  bool in_substream_ = false;
  bool at_end_ = false;
  uint64_t seq_ = 0;
  uint64_t offset_ = 0;
  uint64_t record_start_ = 0;
  uint32_t comp_allowed_ = 0;  // bit c: the substream's BEGIN lists Compression c
};

}  // namespace volstack::pool
