// zstd streaming for blobs (cache/transfer/blob.cpp): the tar stream
// compressed into a BlobSink as it is written, and one zstd frame pulled out
// of a BlobSource as the reader needs it. Private to the cache layer.
#pragma once

#include <zstd.h>

#include <cstddef>
#include <vector>

#include "tvmffi_jit/cache/transfer/blob.h"

namespace tvmffi_jit::cache {

// Compresses what is written (with a checksum) into `sink`.
class ZstdCompressor {
 public:
  ZstdCompressor(const BlobSink& sink, int level);
  ~ZstdCompressor();
  ZstdCompressor(const ZstdCompressor&) = delete;
  ZstdCompressor& operator=(const ZstdCompressor&) = delete;
  void write(const char* data, size_t size) { pump(data, size, ZSTD_e_continue); }
  void finish() { pump(nullptr, 0, ZSTD_e_end); }

 private:
  void pump(const char* data, size_t size, ZSTD_EndDirective mode);
  const BlobSink& sink_;
  ZSTD_CCtx* cs_;
  std::vector<char> out_;
};

// Decompressed bytes of exactly one zstd frame, pulled on demand. A frame
// that does not decode is a corrupt blob (Error(kIo), "corrupt blob: ...").
class ZstdDecompressor {
 public:
  explicit ZstdDecompressor(const BlobSource& source);
  ~ZstdDecompressor();
  ZstdDecompressor(const ZstdDecompressor&) = delete;
  ZstdDecompressor& operator=(const ZstdDecompressor&) = delete;

  // Fills `size` bytes; false if the frame ended first.
  bool read_exact(char* dst, size_t size);

  // The rest of the frame must be zero bytes (at most `max_bytes` of them),
  // and nothing may follow the frame.
  void expect_zero_tail(size_t max_bytes);

 private:
  bool refill();
  const BlobSource& source_;
  ZSTD_DCtx* ds_;
  std::vector<char> in_;
  size_t in_pos_ = 0, in_size_ = 0;
  std::vector<char> out_;
  size_t out_pos_ = 0, out_end_ = 0;
  bool frame_done_ = false;
};

}  // namespace tvmffi_jit::cache
